// Checks on an inherited listening socket (inherited_listener.hpp): open, a socket, TCP,
// listening, bound to the rendezvous port. Each failure names the descriptor and what it is.
#include "runtime/rendezvous/inherited_listener.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace chorus {

status check_inherited_listener(int fd, uint16_t port) {
  const std::string name = "CHORUS_RENDEZVOUS_FD=" + std::to_string(fd);
  auto fail = [&](const std::string& why) { return status{errc::rendezvous, name + " " + why}; };
  struct stat st{};
  if (::fstat(fd, &st) != 0) return fail(std::string("is not open: ") + std::strerror(errno));
  if (!S_ISSOCK(st.st_mode)) return fail("is not a socket");
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0 || value != SOCK_STREAM)
    return fail("is not a stream socket");
  len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value == 0)
    return fail("is not listening");
  sockaddr_storage addr{};
  len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return fail(std::string("has no address: ") + std::strerror(errno));
  uint16_t bound = 0;
  if (addr.ss_family == AF_INET)
    bound = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  else if (addr.ss_family == AF_INET6)
    bound = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  else
    return fail("is not an IPv4 or IPv6 socket");
  if (bound != port)
    return fail("listens on port " + std::to_string(bound) + ", not the rendezvous port " + std::to_string(port));
  int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0)
    return fail(std::string("cannot be marked close-on-exec: ") + std::strerror(errno));
  return {};
}

}  // namespace chorus
