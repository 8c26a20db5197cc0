// Blocking POSIX socket helpers with deadlines, used while a job's connections are set up
// (before Asio owns them): listen, connect with retries, whole-buffer send/recv, frames.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus::tcp {

using clock = std::chrono::steady_clock;

/// Closes a file descriptor when it goes out of scope.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
  unique_fd& operator=(unique_fd&& o) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd();
  int get() const { return fd_; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

/// host (name, IPv4 or IPv6 address without brackets) and port.
struct endpoint {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const;  ///< "host:port", "[v6]:port"
};
/// Parses "host:port" or "[v6]:port".
result<endpoint> parse_endpoint(const std::string& s);

/// A listening socket on host:port (IPv4 or IPv6; port 0 picks one); `bound` receives the real port.
result<unique_fd> listen_on(const std::string& host, uint16_t port, uint16_t* bound);
/// Connects, retrying refused connections until the deadline (the peer may not listen yet).
result<unique_fd> connect_to(const endpoint& ep, clock::time_point deadline);
status send_all(int fd, const void* data, std::size_t n, clock::time_point deadline);
status recv_all(int fd, void* data, std::size_t n, clock::time_point deadline);

struct frame {
  wire::frame_header header;
  std::vector<std::byte> payload;
};
status send_frame(int fd, const wire::frame_header& h, const std::vector<std::byte>& payload,
                  clock::time_point deadline);
result<frame> recv_frame(int fd, const wire::frame_limits& limits, clock::time_point deadline);

/// TCP_NODELAY, socket buffer sizes, keepalive; makes the socket blocking again.
void tune_socket(int fd, int buffer_bytes);
/// The kernel's share of peer liveness on `fd`: TCP_USER_TIMEOUT (data left unacknowledged,
/// zero-window probes included) and keepalive probes that give up after about `timeout`.
/// A frozen process whose kernel still answers is caught by the control link's heartbeats.
void set_liveness(int fd, std::chrono::milliseconds timeout);
/// "127.0.0.1:51234" or "[fd00::1]:51234" of the remote side.
std::string peer_name(int fd);
/// This host's address on the route to `host` (a name or a numeric address): the source address
/// a UDP socket connected there gets (no packet is sent); IPv6 addresses come without brackets.
/// errc::config naming the host when the name does not resolve or no route leads there.
result<std::string> address_toward(const std::string& host);
/// The same for publishing our endpoint: 127.0.0.1 for a local or empty `host`, or when
/// address_toward fails.
std::string local_address_towards(const std::string& host);

}  // namespace chorus::tcp
