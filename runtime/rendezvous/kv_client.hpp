// Every rank's side of the rendezvous: one TCP connection to rank 0's kv_server, used with
// blocking calls that each end by a deadline. Each connection starts with the handshake of
// kv_auth.hpp (both sides prove the job secret); then it sends one request frame
// (kv_protocol.hpp) and reads its reply; reconnects on the next call after a broken connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/status.hpp"
#include "runtime/rendezvous/kv_auth.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"

namespace chorus {

namespace kv {
/// "300 ms", "60 s": how rendezvous messages print a wait.
std::string format_duration(std::chrono::milliseconds d);
}  // namespace kv

/// A blocking client of the store. Not thread-safe: one caller at a time.
class kv_client {
 public:
  using clock = std::chrono::steady_clock;

  /// How long past a get/gather's wait the client still waits for the server's timeout reply.
  static constexpr std::chrono::milliseconds reply_grace{1000};

  /// `host`:`port` is only remembered; nothing connects until connect() or the first call.
  /// `creds` and `rank` are what the handshake proves and claims.
  kv_client(std::string host, uint16_t port, kv::credentials creds, uint32_t rank);
  ~kv_client();
  kv_client(const kv_client&) = delete;
  kv_client& operator=(const kv_client&) = delete;

  /// Connects, retrying refused or unreachable attempts with backoff until `deadline`: rank 0 may
  /// start after the others. errc::rendezvous names the address and the last system error;
  /// errc::auth when the store or this client fails the handshake (another job, another secret).
  status connect(clock::time_point deadline);

  /// Sends `r` and returns the server's reply. For get/gather, sets r.wait_ms to the time left
  /// until `deadline` and waits for the reply until deadline + reply_grace. Connects first when
  /// not connected. Transport failures are errc::rendezvous naming the address; a reply that
  /// does not decode is errc::protocol. Timeouts of the wait come back as reply_code::timeout.
  result<kv::reply> call(kv::request r, clock::time_point deadline);

  /// "host:port" as given.
  const std::string& address() const { return address_; }

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::string address_;
};

}  // namespace chorus
