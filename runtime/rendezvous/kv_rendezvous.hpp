// The job's own rendezvous store: rank 0 serves a key-value store (kv_server) on the rendezvous
// address from process_env, every rank (rank 0 included) connects to it (kv_client). In an
// elastic job chorusrun serves the store instead, and round k's keys live under "round/<k>/"
// (elastic_round.hpp). rendezvous::open() makes one.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/rendezvous/rendezvous.hpp"

namespace chorus {

class kv_client;
class kv_server;

/// Contract: rank 0 serves the store only while its kv_rendezvous lives. Thread-safe: calls from
/// several threads are serialised, so a blocked get() delays a publish() from another thread
/// until it returns.
class kv_rendezvous final : public rendezvous {
 public:
  /// Rank 0 first starts the store: on env.rendezvous_host when that is a loopback address, else
  /// on every interface (the host may be a name that only resolves elsewhere, e.g. a Kubernetes
  /// service), at env.rendezvous_port (0: pick one; only valid for size 1). Then every rank
  /// connects, retrying until env.rendezvous_timeout.
  static result<std::unique_ptr<kv_rendezvous>> open(const process_env& env);

  status publish(const std::string& key, const std::string& value) override;
  result<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override;
  result<std::vector<std::string>> gather(const std::string& prefix, std::chrono::milliseconds timeout) override;

  /// Rank 0: stops serving (clients then see their connection close).
  ~kv_rendezvous() override;
  kv_rendezvous(const kv_rendezvous&) = delete;
  kv_rendezvous& operator=(const kv_rendezvous&) = delete;

  /// "host:port" of the store, with the port actually bound when env asked for port 0.
  const std::string& address() const override { return address_; }
  int rank() const override { return env_.rank; }
  int size() const override { return env_.size; }
  uint64_t session_id() const override { return session_id_; }

 private:
  kv_rendezvous(process_env env, std::string address, std::unique_ptr<kv_server> server,
                std::unique_ptr<kv_client> client);

  process_env env_;
  std::string address_;
  std::unique_ptr<kv_server> server_;  // rank 0 only
  std::unique_ptr<kv_client> client_;
  std::mutex mu_;  // serialises calls on client_
  std::string prefix_;  // "round/<k>/" in an elastic job (the launcher's store holds every round)
  uint64_t session_id_ = 0;
};

}  // namespace chorus
