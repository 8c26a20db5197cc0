// Test helper: whether another process could take a loopback port now, probed the way the
// rendezvous store binds it (SO_REUSEADDR), for tests that a held port stays held.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace chorus::testing {

/// errno of binding a fresh socket to 127.0.0.1:`port` as kv_server binds (0: it bound).
inline int bind_errno(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  int err = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace chorus::testing
