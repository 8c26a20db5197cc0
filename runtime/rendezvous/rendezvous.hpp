// How ranks find each other: rank 0 serves a key-value store (kv_server) on the rendezvous
// address from process_env, every rank (rank 0 included) connects to it (kv_client), publishes
// its endpoints under "<prefix><rank>" and gathers everyone else's. In an elastic job chorusrun
// serves the store instead, and round k's keys live under "round/<k>/" (elastic_round.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/env/process_env.hpp"

namespace chorus {

class kv_client;
class kv_server;

/// One rank's handle on the job's rendezvous store.
///
/// Contract: rank 0 serves the store only while its rendezvous object lives; keeping it alive until
/// every rank has read what it needs is the caller's job (the transport keeps it for the job).
/// Thread-safe: calls from several threads are serialised, so a blocked get() delays a publish()
/// from another thread until it returns.
class rendezvous {
 public:
  /// Rank 0 first starts the store: on env.rendezvous_host when that is a loopback address, else
  /// on every interface (the host may be a name that only resolves elsewhere, e.g. a Kubernetes
  /// service), at env.rendezvous_port (0: pick one; only valid for size 1). Then every rank
  /// connects, retrying until env.rendezvous_timeout. Errors: errc::config for an unusable env,
  /// errc::rendezvous when rank 0 cannot listen or a rank cannot reach the store (naming the
  /// address).
  static result<std::unique_ptr<rendezvous>> open(const process_env& env);

  /// Stores `value` under `key`, replacing any earlier value. Ends within env.rendezvous_timeout.
  /// Keys are 1-4096 bytes, values up to 1 MiB (errc::invalid_argument otherwise).
  status publish(const std::string& key, const std::string& value);

  /// The value under `key`, waiting up to `timeout` for some rank to publish it.
  /// errc::rendezvous naming the key when it never appears.
  result<std::string> get(const std::string& key, std::chrono::milliseconds timeout);

  /// Waits for "<prefix><r>" for every r in [0, size) and returns the values by rank. On timeout:
  /// errc::rendezvous naming the ranks that never arrived, e.g.
  /// "rendezvous 127.0.0.1:29500: ranks 2,3 of 4 never published 'ep/' within 60 s".
  result<std::vector<std::string>> gather(const std::string& prefix,
                                          std::chrono::milliseconds timeout);

  /// Rank 0: stops serving (clients then see their connection close).
  ~rendezvous();
  rendezvous(const rendezvous&) = delete;
  rendezvous& operator=(const rendezvous&) = delete;

  /// "host:port" of the store, with the port actually bound when env asked for port 0.
  const std::string& address() const { return address_; }
  int rank() const { return env_.rank; }
  int size() const { return env_.size; }
  /// This attempt's id (wire::session_id of the secret, the job id and the nonce rank 0 drew for
  /// this round of its store): the same on every rank of the round, another one after a restart.
  uint64_t session_id() const { return session_id_; }

 private:
  rendezvous(process_env env, std::string address, std::unique_ptr<kv_server> server,
             std::unique_ptr<kv_client> client);

  process_env env_;
  std::string address_;
  std::unique_ptr<kv_server> server_;  // rank 0 only
  std::unique_ptr<kv_client> client_;
  std::mutex mu_;  // serialises calls on client_
  std::string prefix_;  // "round/<k>/" in an elastic job (the launcher's store holds every round)
  uint64_t session_id_ = 0;
};

/// "2,3", "0-5,9": ranks for messages, runs of three or more as ranges, at most `max_items` items.
std::string format_rank_list(const std::vector<uint32_t>& ranks, size_t max_items = 32);

}  // namespace chorus
