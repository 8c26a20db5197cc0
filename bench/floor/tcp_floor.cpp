// Bare-socket ring allreduce of two ranks: the TCP floor chorus-bench reports.
#include "bench/floor/tcp_floor.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "runtime/collectives/communicator.hpp"
#include "runtime/collectives/reduce.hpp"

namespace chorus::bench {
namespace {

constexpr std::size_t segment_bytes = 512u << 10;  // Chorus' default segment

[[noreturn]] void sys_fail(const std::string& what) {
  throw std::runtime_error("tcp_floor: " + what + ": " + std::strerror(errno));
}

void wait_for(int fd, short events) {
  pollfd p{fd, events, 0};
  while (poll(&p, 1, -1) < 0)
    if (errno != EINTR) sys_fail("poll");
}

using addrinfo_ptr = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

// `host` as a numeric socket address with `port` (IPv4 or IPv6).
addrinfo_ptr numeric_address(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) throw std::runtime_error("tcp_floor: address '" + host + "': " + gai_strerror(rc));
  return addrinfo_ptr(found, &freeaddrinfo);
}

}  // namespace

std::unique_ptr<tcp_floor> tcp_floor::connect(communicator& c, const std::string& host) {
  if (c.size() != 2) return nullptr;
  // port, token low, token high, then rank 0's address as text (NUL-terminated)
  constexpr std::size_t head = 3, text_words = 16;
  int32_t announce[head + text_words] = {};
  if (host.size() >= text_words * sizeof(int32_t)) throw std::runtime_error("tcp_floor: address too long: " + host);
  int listener = -1;
  if (c.rank() == 0) {
    auto where = numeric_address(host, "0");
    listener = socket(where->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) sys_fail("socket");
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (bind(listener, where->ai_addr, where->ai_addrlen) < 0 || listen(listener, 4) < 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) < 0)
      sys_fail("listen on " + host);
    std::random_device rd;
    announce[0] = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
    announce[1] = static_cast<int32_t>(rd());
    announce[2] = static_cast<int32_t>(rd());
    std::memcpy(&announce[head], host.data(), host.size());
  }
  auto st = c.broadcast(announce, head + text_words, dtype::i32, 0);
  if (!st.ok()) throw std::runtime_error("tcp_floor: handing out the port: " + st.to_string());
  int fd = -1;
  if (c.rank() == 1) {
    char text[text_words * sizeof(int32_t)];
    std::memcpy(text, &announce[head], sizeof text);
    text[sizeof text - 1] = '\0';
    auto where = numeric_address(text, std::to_string(announce[0]));
    fd = socket(where->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, where->ai_addr, where->ai_addrlen) < 0)
      sys_fail(std::string("connect to rank 0 at ") + text);
    if (send(fd, &announce[1], 8, MSG_NOSIGNAL) != 8) sys_fail("send the token");
  } else {
    for (;;) {
      fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) sys_fail("accept");
      int32_t token[2];
      if (recv(fd, token, 8, MSG_WAITALL) == 8 && token[0] == announce[1] && token[1] == announce[2]) break;
      close(fd);  // not rank 1
    }
    close(listener);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) sys_fail("fcntl");
  std::unique_ptr<tcp_floor> f(new tcp_floor(fd, c.rank()));
  f->scratch_.assign(segment_bytes / sizeof(float), 0.0f);
  return f;
}

tcp_floor::~tcp_floor() { close(fd_); }

void tcp_floor::fail(const char* what) const {
  throw std::runtime_error(std::string("tcp_floor: ") + what + " on rank " + std::to_string(rank_) + ": " +
                           (errno ? std::strerror(errno) : "the peer closed the connection"));
}

template <class Io>
void tcp_floor::move_all(std::size_t n, short ready, const char* what, Io io) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = io(done, n - done);
    if (r > 0) {
      done += static_cast<std::size_t>(r);
    } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      wait_for(fd_, ready);
    } else {
      fail(what);
    }
  }
}

void tcp_floor::send_all(const void* p, std::size_t n) {
  auto* b = static_cast<const char*>(p);
  move_all(n, POLLOUT, "send",
           [&](std::size_t done, std::size_t left) { return send(fd_, b + done, left, MSG_NOSIGNAL | MSG_DONTWAIT); });
}

void tcp_floor::recv_all(void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  move_all(n, POLLIN, "recv", [&](std::size_t done, std::size_t left) {
    ssize_t r = recv(fd_, b + done, left, MSG_DONTWAIT);
    if (r == 0) errno = 0;  // the peer closed: fail() says so instead of a stale errno
    return r;
  });
}

void tcp_floor::barrier() {
  char out = 0, in = 0;
  send_all(&out, 1);
  recv_all(&in, 1);
}

void tcp_floor::allreduce_max(double* data, std::size_t count) {
  std::vector<double> theirs(count);
  send_all(data, count * sizeof(double));
  recv_all(theirs.data(), count * sizeof(double));
  for (std::size_t i = 0; i < count; ++i) data[i] = std::max(data[i], theirs[i]);
}

void tcp_floor::allreduce_sum(float* data, std::size_t count) {
  // Rank 0 reduces [0, h), rank 1 [h, count). Each sends the other's half, then the reduced
  // segments of its own as they are made; the peer's stream is its sends in that order, so the
  // first bytes in are for reducing and the rest land in place.
  auto* base = reinterpret_cast<char*>(data);
  const std::size_t h = count / 2 * sizeof(float), total = count * sizeof(float);
  char* mine = rank_ == 0 ? base : base + h;
  char* theirs = rank_ == 0 ? base + h : base;
  const std::size_t mine_n = rank_ == 0 ? h : total - h, theirs_n = total - mine_n;

  struct piece {
    const char* p;
    std::size_t n;
  };
  std::deque<piece> out;
  for (std::size_t o = 0; o < theirs_n; o += segment_bytes)
    out.push_back({theirs + o, std::min(segment_bytes, theirs_n - o)});
  std::size_t sent = 0, reduced = 0, fill = 0, gathered = 0;
  auto* scratch = reinterpret_cast<char*>(scratch_.data());
  while (reduced < mine_n || gathered < theirs_n || !out.empty()) {
    for (int k = 0; k < 16; ++k) {  // reads first: they free the peer's sends and make our next ones
      ssize_t r;
      if (reduced < mine_n) {
        std::size_t seg = std::min(segment_bytes, mine_n - reduced);
        r = recv(fd_, scratch + fill, seg - fill, MSG_DONTWAIT);
        if (r > 0 && (fill += static_cast<std::size_t>(r)) == seg) {
          reduce_into(mine + reduced, scratch, seg / sizeof(float), dtype::f32, reduce_op::sum);
          out.push_back({mine + reduced, seg});
          reduced += seg;
          fill = 0;
        }
      } else if (gathered < theirs_n) {
        r = recv(fd_, theirs + gathered, theirs_n - gathered, MSG_DONTWAIT);
        if (r > 0) gathered += static_cast<std::size_t>(r);
      } else {
        break;
      }
      if (r == 0) {
        errno = 0;
        fail("allreduce");
      }
      if (r < 0) {
        if (errno != EAGAIN && errno != EINTR) fail("allreduce");
        break;
      }
    }
    while (!out.empty()) {
      ssize_t r = send(fd_, out.front().p + sent, out.front().n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r < 0) {
        if (errno != EAGAIN && errno != EINTR) fail("allreduce");
        break;
      }
      if ((sent += static_cast<std::size_t>(r)) == out.front().n) {
        out.pop_front();
        sent = 0;
      }
    }
    if (reduced < mine_n || gathered < theirs_n || !out.empty())
      wait_for(fd_, static_cast<short>((reduced < mine_n || gathered < theirs_n ? POLLIN : 0) |
                                       (out.empty() ? 0 : POLLOUT)));
  }
}

}  // namespace chorus::bench
