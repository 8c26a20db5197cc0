// POSIX socket helpers with deadlines (poll-based), for connection setup and handshakes.
#include "runtime/transport/tcp/socket_util.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace chorus::tcp {
namespace {

std::string err_text(int e) { return std::strerror(e); }

int ms_left(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

void set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

// An IPv4 or IPv6 socket address.
struct sock_address {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const { return storage.ss_family; }
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
};

// Numeric addresses of either family, else the first IPv4 then IPv6 result of the resolver.
result<sock_address> resolve(const std::string& host, uint16_t port) {
  sock_address a;
  std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len = sizeof(sockaddr_in);
    return a;
  }
  if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.len = sizeof(sockaddr_in6);
    return a;
  }
  for (int family : {AF_INET, AF_INET6}) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(h.c_str(), nullptr, &hints, &res) != 0 || !res) continue;
    std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
    a.len = res->ai_addrlen;
    freeaddrinfo(res);
    if (family == AF_INET) v4->sin_port = htons(port);
    else v6->sin6_port = htons(port);
    return a;
  }
  return status{errc::config, "cannot resolve host '" + host + "'"};
}

// "host:port" of a socket address, brackets around IPv6.
std::string address_text(const sockaddr_storage& ss, bool with_port) {
  char buf[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (ss.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    port = ntohs(v6->sin6_port);
    return with_port ? "[" + std::string(buf) + "]:" + std::to_string(port) : std::string(buf);
  }
  auto* v4 = reinterpret_cast<const sockaddr_in*>(&ss);
  inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
  port = ntohs(v4->sin_port);
  return with_port ? std::string(buf) + ":" + std::to_string(port) : std::string(buf);
}

// Waits until fd is ready for `events` or the deadline passes.
status wait_ready(int fd, short events, clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return {};
    if (rc == 0) return status{errc::timeout, std::string(what) + " timed out"};
    if (errno != EINTR) return status{errc::connection_lost, std::string(what) + ": " + err_text(errno)};
  }
}

}  // namespace

unique_fd& unique_fd::operator=(unique_fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}
unique_fd::~unique_fd() { reset(); }
int unique_fd::release() {
  int f = fd_;
  fd_ = -1;
  return f;
}
void unique_fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string endpoint::to_string() const {
  return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port) : host + ":" + std::to_string(port);
}

result<endpoint> parse_endpoint(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    return status{errc::config, "malformed endpoint '" + s + "', expected host:port or [v6]:port"};
  endpoint ep;
  ep.host = s.substr(0, colon);
  if (ep.host.size() > 2 && ep.host.front() == '[' && ep.host.back() == ']') ep.host = ep.host.substr(1, ep.host.size() - 2);
  try {
    int port = std::stoi(s.substr(colon + 1));
    if (port < 0 || port > 65535) throw std::out_of_range("port");
    ep.port = static_cast<uint16_t>(port);
  } catch (...) {
    return status{errc::config, "malformed port in endpoint '" + s + "'"};
  }
  return ep;
}

result<unique_fd> listen_on(const std::string& host, uint16_t port, uint16_t* bound) {
  auto sa = resolve(host, port);
  if (!sa) return sa.error();
  unique_fd fd(::socket(sa->family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return status{errc::config, "socket(): " + err_text(errno)};
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), sa->get(), sa->len) != 0)
    return status{errc::config, "bind " + endpoint{host, port}.to_string() + ": " + err_text(errno)};
  if (::listen(fd.get(), 512) != 0) return status{errc::config, "listen(): " + err_text(errno)};
  sockaddr_storage got{};
  socklen_t len = sizeof got;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&got), &len);
  if (bound)
    *bound = ntohs(got.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&got)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  return fd;
}

result<unique_fd> connect_to(const endpoint& ep, clock::time_point deadline) {
  auto sa = resolve(ep.host, ep.port);
  if (!sa) return sa.error();
  std::string last = "no attempt";
  while (clock::now() < deadline) {
    unique_fd fd(::socket(sa->family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) return status{errc::connection_lost, "socket(): " + err_text(errno)};
    set_nonblocking(fd.get(), true);
    int rc = ::connect(fd.get(), sa->get(), sa->len);
    if (rc != 0 && errno == EINPROGRESS) {
      auto st = wait_ready(fd.get(), POLLOUT, deadline, "connect");
      if (!st.ok()) return status{st.code(), "connect to " + ep.to_string() + ": " + st.message()};
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc == 0) {
      set_nonblocking(fd.get(), false);
      return fd;
    }
    last = err_text(errno);
    if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EHOSTUNREACH && errno != ECONNRESET)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status{errc::connection_lost, "cannot connect to " + ep.to_string() + ": " + last};
}

namespace {

// Moves n bytes through `io` (a send or receive that does not block) as the socket becomes
// ready, until the deadline; `what` names the direction in errors. `zero_is_close`: receiving
// 0 bytes means the peer closed the connection.
template <class Byte, class Io>
status transfer_all(int fd, Byte* p, std::size_t n, clock::time_point deadline, short events, const char* what,
                    bool zero_is_close, Io io) {
  while (n > 0) {
    auto st = wait_ready(fd, events, deadline, what);
    if (!st.ok()) return st;
    ssize_t k = io(p, n);
    if (zero_is_close && k == 0) return status{errc::connection_lost, "connection closed by peer"};
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return status{errc::connection_lost, std::string(what) + ": " + err_text(errno)};
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return {};
}

}  // namespace

status send_all(int fd, const void* data, std::size_t n, clock::time_point deadline) {
  return transfer_all(fd, static_cast<const char*>(data), n, deadline, POLLOUT, "send", false,
                      [fd](const char* p, std::size_t m) { return ::send(fd, p, m, MSG_NOSIGNAL | MSG_DONTWAIT); });
}

status recv_all(int fd, void* data, std::size_t n, clock::time_point deadline) {
  return transfer_all(fd, static_cast<char*>(data), n, deadline, POLLIN, "receive", true,
                      [fd](char* p, std::size_t m) { return ::recv(fd, p, m, MSG_DONTWAIT); });
}

status send_frame(int fd, const wire::frame_header& h, const std::vector<std::byte>& payload,
                  clock::time_point deadline) {
  std::vector<std::byte> buf(wire::frame_header_size + payload.size());
  auto hh = h;
  hh.length = static_cast<uint32_t>(payload.size());
  wire::encode(hh, buf.data());
  if (!payload.empty()) std::memcpy(buf.data() + wire::frame_header_size, payload.data(), payload.size());
  return send_all(fd, buf.data(), buf.size(), deadline);
}

result<frame> recv_frame(int fd, const wire::frame_limits& limits, clock::time_point deadline) {
  std::byte head[wire::frame_header_size];
  auto st = recv_all(fd, head, sizeof head, deadline);
  if (!st.ok()) return st;
  auto h = wire::decode(head, sizeof head, limits);
  if (!h) return h.error();
  frame f{*h, std::vector<std::byte>(h->length)};
  if (h->length > 0) {
    st = recv_all(fd, f.payload.data(), f.payload.size(), deadline);
    if (!st.ok()) return st;
  }
  return f;
}

void tune_socket(int fd, int buffer_bytes) {
  set_nonblocking(fd, false);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  if (buffer_bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  }
}

void set_liveness(int fd, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  auto ms = static_cast<unsigned>(std::min<int64_t>(timeout.count(), INT32_MAX));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  int secs = static_cast<int>(std::max<int64_t>(1, timeout.count() / 1000));
  int idle = std::max(1, secs / 2), interval = std::max(1, secs / 6), count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

std::string peer_name(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return address_text(sa, true);
}

result<std::string> address_toward(const std::string& host) {
  auto sa = resolve(host, 9);
  if (!sa) return sa.error();
  unique_fd fd(::socket(sa->family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0 || ::connect(fd.get(), sa->get(), sa->len) != 0)
    return status{errc::config, "no route from this host to host '" + host + "': " + std::strerror(errno)};
  sockaddr_storage me{};
  socklen_t len = sizeof me;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&me), &len) != 0)
    return status{errc::config, "no local address toward host '" + host + "': " + std::strerror(errno)};
  return address_text(me, false);
}

std::string local_address_towards(const std::string& host) {
  if (host == "127.0.0.1" || host == "localhost" || host.empty()) return "127.0.0.1";
  auto addr = address_toward(host);
  return addr ? *addr : "127.0.0.1";
}

}  // namespace chorus::tcp
