// How ranks find each other: every rank publishes small values (its endpoints, its host
// identity, its settings) under "<prefix><rank>" in a key-value store and gathers everyone
// else's. Two stores implement it: the job's own (kv_rendezvous.hpp: rank 0 serves it, or
// chorusrun in an elastic job), and the store torch.distributed hands a process group
// (bindings/python/src/c10d/store_rendezvous.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/env/process_env.hpp"

namespace chorus {

/// One rank's handle on the store its job meets in.
///
/// Contract: the store stays readable while any rank may still read what it needs (the
/// communicator keeps its rendezvous for the job's life). Implementations serialise calls from
/// several threads.
class rendezvous {
 public:
  virtual ~rendezvous() = default;

  /// The job's own store (kv_rendezvous.hpp): rank 0 serves it at env's rendezvous address,
  /// every rank connects. Errors: errc::config for an unusable env, errc::rendezvous when rank 0
  /// cannot listen or a rank cannot reach the store (naming the address).
  static result<std::unique_ptr<rendezvous>> open(const process_env& env);

  /// Stores `value` under `key`, replacing any earlier value. Keys are 1-4096 bytes, values up
  /// to 1 MiB (errc::invalid_argument otherwise).
  virtual status publish(const std::string& key, const std::string& value) = 0;

  /// The value under `key`, waiting up to `timeout` for some rank to publish it.
  /// errc::rendezvous naming the key when it never appears.
  virtual result<std::string> get(const std::string& key, std::chrono::milliseconds timeout) = 0;

  /// Waits for "<prefix><r>" for every r in [0, size) and returns the values by rank. On timeout:
  /// errc::rendezvous naming the ranks that never arrived, e.g.
  /// "rendezvous 127.0.0.1:29500: ranks 2,3 of 4 never published 'ep/' within 60 s".
  virtual result<std::vector<std::string>> gather(const std::string& prefix, std::chrono::milliseconds timeout) = 0;

  /// Where the store is, for messages ("host:port", "torch store of group 'x'").
  virtual const std::string& address() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This attempt's id (wire::session_id of the secret, the job id and a nonce the store's
  /// rank 0 drew for this attempt): the same on every rank, another one after a restart.
  virtual uint64_t session_id() const = 0;
};

/// "2,3", "0-5,9": ranks for messages, runs of three or more as ranges, at most `max_items` items.
std::string format_rank_list(const std::vector<uint32_t>& ranks, size_t max_items = 32);

/// The hex text of `bytes` (lower case), and back: for values that travel through a store as text
/// (nonces, secrets). from_hex fails on odd length or a non-hex digit.
std::string to_hex(const void* bytes, std::size_t n);
result<std::string> from_hex(const std::string& hex);

}  // namespace chorus
