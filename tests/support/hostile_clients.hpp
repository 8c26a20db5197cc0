// Test helper for the flood tests (a store's or a data port's): a loopback connection with a
// bounded connect, and the bad starts a hostile client sends before it closes (garbage where
// the hello goes, a 2 GiB length prefix, nothing at all).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace chorus::testing {

/// A connected TCP socket to 127.0.0.1:port, or -1 (nothing listening, the connection refused,
/// or a connect stuck on a full backlog for 1 s).
inline int dial_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval bound{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

enum class bad_start { garbage, huge_length, nothing };

/// Sends `kind` on `fd` (best effort) and closes it.
inline void send_bad_start_and_close(int fd, bad_start kind) {
  std::string bad;
  if (kind == bad_start::garbage) bad.assign(64, '\xa5');                           // where the hello goes
  if (kind == bad_start::huge_length) bad = std::string("\xff\xff\xff\x7f", 4) + "x";  // a 2 GiB length prefix
  if (!bad.empty()) (void)!::send(fd, bad.data(), bad.size(), MSG_NOSIGNAL);
  ::close(fd);
}

}  // namespace chorus::testing
