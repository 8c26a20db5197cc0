// Rank 0's side of the rendezvous: a key-value store served over TCP on its own thread.
// Receives SET/GET/GATHER frames (kv_protocol.hpp) from any number of clients and answers each;
// a GET or GATHER whose keys are missing is parked until a SET supplies them or its wait ends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/status.hpp"

namespace chorus {

/// The store and its listener. Thread-safe: start/stop/port may be called from any thread;
/// the store itself lives on the server's thread and is only reached through the protocol.
class kv_server {
 public:
  kv_server();
  /// Stops serving: closes the listener and every connection, joins the thread.
  ~kv_server();
  kv_server(const kv_server&) = delete;
  kv_server& operator=(const kv_server&) = delete;

  /// Binds host:port and starts serving. Port 0 lets the kernel pick. An empty host listens on
  /// every interface (IPv6 dual-stack, or IPv4 where IPv6 is unavailable). Returns the bound
  /// port, or errc::rendezvous naming the address and the system's reason. Call once.
  result<uint16_t> start(const std::string& host, uint16_t port);

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
