// A rendezvous in a key-value store that someone else runs: the store torch.distributed hands a
// process group (a PrefixStore over its TCPStore or FileStore; bindings/python/src/c10d/), seen
// through the few calls every such store has (external_store). No port of Chorus's own is opened:
// whatever launched the framework (torchrun's agent, any init method) is the rendezvous.
// Keys live under "chorus/<attempt>/", the attempt counted in the store itself, so that a store
// that outlives one group's members (destroy_process_group, then init again) is met afresh. The
// group agrees there on its job secret (CHORUS_JOB_SECRET, else 32 random bytes rank 0 draws:
// connections are authenticated even without one), its job id and this attempt's nonce.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/rendezvous/rendezvous.hpp"

namespace chorus {

/// A store's calls. Implementations turn their store's exceptions into statuses.
class external_store {
 public:
  virtual ~external_store() = default;
  virtual status set(const std::string& key, const std::string& value) = 0;
  /// The value under `key`, waiting up to `timeout` for it; errc::timeout when it never came.
  virtual result<std::string> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Adds `delta` to the integer under `key` (0 when absent) and returns the sum.
  virtual result<int64_t> add(const std::string& key, int64_t delta) = 0;
  /// Whether `key` is there now.
  virtual result<bool> check(const std::string& key) = 0;
  /// The store, for messages ("torch.distributed store of group '0'").
  virtual std::string describe() const = 0;
};

class store_rendezvous final : public rendezvous {
 public:
  /// Rank `rank` of `size` joins the group in `store`. `env` gives the secret (empty: rank 0
  /// draws one), the job id (0: rank 0 draws one) and the timeout; both come back filled with the
  /// group's values, for the handshake. Errors: errc::rendezvous naming the store and the ranks
  /// that never arrived; errc::invalid_argument for a rank outside [0, size).
  static result<std::unique_ptr<store_rendezvous>> open(std::unique_ptr<external_store> store, int rank, int size,
                                                        process_env& env);

  status publish(const std::string& key, const std::string& value) override;
  result<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override;
  result<std::vector<std::string>> gather(const std::string& prefix, std::chrono::milliseconds timeout) override;
  const std::string& address() const override { return shown_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t session_id() const override { return session_id_; }

 private:
  store_rendezvous(std::unique_ptr<external_store> store, int rank, int size, std::chrono::milliseconds timeout);
  status check_key(const std::string& key) const;

  std::unique_ptr<external_store> store_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::string shown_;
  std::string prefix_;  // "chorus/<attempt>/"
  uint64_t session_id_ = 0;
};

}  // namespace chorus
