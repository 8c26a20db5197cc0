// The listening side of a rank: one thread that accepts connections for the whole job.
// While the mesh is being built it admits each expected (rank, stream) once; later arrivals,
// and clients without the job secret, are refused with a reason and logged. The thread sleeps
// in poll(2) and costs nothing while idle.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/transport/tcp/handshake_io.hpp"
#include "runtime/transport/tcp/socket_util.hpp"

namespace chorus::tcp {

class acceptor {
 public:
  /// Accepts from ranks above cfg.rank, cfg.num_streams connections each.
  acceptor(unique_fd listener, handshake_config cfg);
  ~acceptor();
  acceptor(const acceptor&) = delete;
  acceptor& operator=(const acceptor&) = delete;

  /// Blocks until every expected connection arrived; fds[peer][stream] (empty for peers
  /// at or below our rank). Afterwards the acceptor refuses every newcomer.
  result<std::vector<std::vector<unique_fd>>> wait_inbound(clock::time_point deadline);
  /// Connections refused so far (wrong secret, unexpected, failed handshake).
  int refused() const;

 private:
  void run();
  void handle(unique_fd fd);

  unique_fd listener_;
  unique_fd wake_;  // eventfd that stops the thread
  handshake_config cfg_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<unique_fd>> inbound_;
  int missing_ = 0;
  bool closed_ = false;  // mesh complete or abandoned: no more admissions
  int refused_ = 0;
  std::thread thread_;
};

}  // namespace chorus::tcp
