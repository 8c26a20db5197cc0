// Rank 0's side of the rendezvous: a key-value store served over TCP on its own thread.
// Each client first proves the job secret (kv_auth.hpp); then it sends SET/GET/GATHER frames
// (kv_protocol.hpp) and gets each answered; a GET or GATHER whose keys are missing is parked
// until a SET supplies them or its wait ends. Everything a client can make the server hold is
// bounded (kv_server_limits): silent, slow or hostile clients cost a bounded amount and never
// hold up the others.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/status.hpp"
#include "runtime/rendezvous/kv_auth.hpp"

namespace chorus {

/// What the server lets clients cost it.
struct kv_server_limits {
  std::chrono::milliseconds handshake_timeout{5000};  ///< to prove the secret, from accept
  std::chrono::milliseconds write_timeout{30000};     ///< for a client to take a reply
  /// Connections not yet authenticated; when all are taken, a new one evicts the oldest.
  std::size_t max_handshaking = 64;
  std::size_t max_connections = 65536;                ///< all connections
  std::size_t max_keys = std::size_t{1} << 20;        ///< keys in the store
  std::size_t max_store_bytes = std::size_t{256} << 20;  ///< keys and values in the store
};

/// The store and its listener. Thread-safe: start/stop/port may be called from any thread;
/// the store itself lives on the server's thread and is only reached through the protocol.
class kv_server {
 public:
  /// Only clients that prove `creds` (kv_auth.hpp) reach the store.
  explicit kv_server(kv::credentials creds, kv_server_limits limits = {});
  /// Stops serving: closes the listener and every connection, joins the thread.
  ~kv_server();
  kv_server(const kv_server&) = delete;
  kv_server& operator=(const kv_server&) = delete;

  /// Binds host:port and starts serving. Port 0 lets the kernel pick. An empty host listens on
  /// every interface (IPv6 dual-stack, or IPv4 where IPv6 is unavailable). Returns the bound
  /// port, or errc::rendezvous naming the address and the system's reason. Call once.
  result<uint16_t> start(const std::string& host, uint16_t port);

  /// Serves on a socket that is already bound and listening (one a launcher held for this
  /// process: inherited_listener.hpp), through a close-on-exec duplicate of it; the caller's
  /// descriptor stays open and listening, so a later server can take it again. Returns the
  /// bound port. Call once, instead of start().
  result<uint16_t> start_on(int listening_fd);

  /// Idempotent; the destructor calls it. Parked requests end with their connection.
  void stop();

  /// The bound port (0 before start).
  uint16_t port() const;

  /// Where a client on this host should connect: the bound address, or loopback when the server
  /// listens on every interface.
  std::string local_connect_host() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace chorus
