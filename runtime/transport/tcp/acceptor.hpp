// The listening side of a rank: one thread that accepts connections for the whole job and a
// small pool of handshake threads. While the mesh is being built it admits each expected
// (rank, stream) once; later arrivals, and clients without the job secret, are refused with a
// reason. Handshakes run concurrently (at most max_handshakes at once, 5 s each), so silent or
// slow sockets cannot hold the mesh past its connect timeout; refusals are logged at a bounded
// rate. Every thread sleeps in poll(2) or on a condition variable and costs nothing while idle.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/transport/tcp/handshake_io.hpp"
#include "runtime/transport/tcp/socket_util.hpp"

namespace chorus::tcp {

class acceptor {
 public:
  /// Handshakes in progress at once; further connections wait in the queue.
  static constexpr int max_handshakes = 16;
  /// Accepted connections waiting for a handshake thread; past this, newcomers are closed.
  static constexpr std::size_t max_queued = 256;
  /// How long one client may take for its handshake.
  static constexpr std::chrono::seconds handshake_timeout{5};

  /// Accepts from ranks above cfg.rank, cfg.num_streams connections each.
  acceptor(unique_fd listener, handshake_config cfg);
  ~acceptor();
  acceptor(const acceptor&) = delete;
  acceptor& operator=(const acceptor&) = delete;

  /// Blocks until every expected connection arrived; fds[peer][stream] (empty for peers
  /// at or below our rank). Afterwards the acceptor refuses every newcomer.
  result<std::vector<std::vector<unique_fd>>> wait_inbound(clock::time_point deadline);
  /// Connections refused so far (wrong secret, unexpected, failed handshake, queue full).
  int refused() const;

 private:
  void run();
  void work();
  void handle(unique_fd fd);
  /// Counts a refusal and logs it, at most a few lines per second (the rest are summed up).
  void refuse(const std::string& who, const std::string& why);

  unique_fd listener_;
  unique_fd wake_;  // eventfd that stops the accept thread
  handshake_config cfg_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // inbound_ complete
  std::condition_variable work_cv_;  // queue_ has work, or stopping_
  std::vector<std::vector<unique_fd>> inbound_;
  int missing_ = 0;
  bool closed_ = false;  // mesh complete or abandoned: no more admissions
  bool stopping_ = false;
  int refused_ = 0;
  status resources_;  // set when accept() failed for lack of descriptors or memory
  std::deque<unique_fd> queue_;
  std::set<int> in_handshake_;  // fds being handshaken (shut down to end them at stop)
  int idle_workers_ = 0;
  std::vector<std::thread> workers_;
  clock::time_point log_window_{};
  int logged_in_window_ = 0, unlogged_ = 0;
  std::thread thread_;
};

}  // namespace chorus::tcp
