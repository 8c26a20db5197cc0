// The floor a two-rank allreduce meets on the ranks' TCP path: a ring allreduce over one
// bare socket, with no framing, no authentication and no actors, one thread per rank polling a
// non-blocking socket. chorus-bench measures it beside Chorus and Gloo (`--impl all`), so that
// both can be read against what the kernel's TCP path itself allows here.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace chorus {
class communicator;
}

namespace chorus::bench {

/// Two ranks only: rank 0 listens on `host` (where Chorus' data plane listens), rank 1 connects. Blocking calls, one
/// thread, the same order on both ranks. Every failure throws std::runtime_error naming the
/// call and the rank.
class tcp_floor {
 public:
  /// Rank 0 hands rank 1 its address, port and a random token through `c`; rank 1 proves the token on
  /// connecting, so a stranger's connection is closed and waited past. Returns nullptr when the
  /// job does not have exactly two ranks.
  static std::unique_ptr<tcp_floor> connect(communicator& c, const std::string& host);

  ~tcp_floor();
  tcp_floor(const tcp_floor&) = delete;
  tcp_floor& operator=(const tcp_floor&) = delete;

  /// In place sum: reduce-scatter then allgather, both halves pipelined in segments (the peer's
  /// reduced segments come back while later ones are still being sent).
  void allreduce_sum(float* data, std::size_t count);
  void barrier();
  void allreduce_max(double* data, std::size_t count);

 private:
  tcp_floor(int fd, int rank) : fd_(fd), rank_(rank) {}
  void send_all(const void* p, std::size_t n);
  void recv_all(void* p, std::size_t n);
  /// Calls `io(done, left)` (one non-blocking send or recv) until `n` bytes moved, waiting for
  /// `ready` (POLLIN, POLLOUT) when the socket would block; fails naming `what` otherwise.
  template <class Io>
  void move_all(std::size_t n, short ready, const char* what, Io io);
  [[noreturn]] void fail(const char* what) const;

  int fd_;
  int rank_;
  std::vector<float> scratch_;  // one received segment before it is reduced, touched once
};

}  // namespace chorus::bench
