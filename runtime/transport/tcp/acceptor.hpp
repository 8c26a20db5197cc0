// The listening side of a rank: one thread that accepts connections for the whole job and a
// small pool of handshake threads. While the mesh is being built it admits each expected
// (rank, stream) once; later arrivals, and clients without the job secret, are refused with a
// reason, logged at a bounded rate. Silent or hostile sockets cannot hold the mesh up:
//   1. The accept thread holds a new connection until its client sends its first bytes (poll),
//      so a socket that never speaks costs no handshake thread.
//   2. Connections that spoke are handshaken by at most max_handshakes threads at once.
//   3. Each connection has handshake_timeout from accept to finish; and at most max_pending are
//      in steps 1-2 at once: a newcomer that finds them all taken evicts the one that has been
//      there longest (a real client takes milliseconds, so silent ones go; one that is evicted
//      anyway dials again: peer_dial.hpp).
//   4. When every handshake thread is busy and connections that spoke wait for one, a handshake
//      that has held its thread for stuck_handshake (a client stalled mid-hello) is ended.
// Every thread sleeps in poll(2) or on a condition variable and costs nothing while idle.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/core/arrival_queue.hpp"
#include "runtime/transport/tcp/handshake_io.hpp"
#include "runtime/transport/tcp/socket_util.hpp"

namespace chorus::tcp {

class acceptor {
 public:
  /// Handshakes in progress at once (threads); connections that spoke wait for one in a queue.
  static constexpr int max_handshakes = 16;
  /// Connections accepted and not yet through their handshake (silent, queued or handshaking);
  /// a newcomer that finds them all taken evicts the oldest.
  static constexpr std::size_t max_pending = 64;
  /// A handshake on its thread this long, while every thread is busy and others wait, is ended
  /// (a client stalled mid-hello; a real one takes milliseconds and dials again if it was slow).
  static constexpr std::chrono::milliseconds stuck_handshake{500};
  /// How long one client may take for its handshake, from accept.
  static constexpr std::chrono::seconds handshake_timeout{5};

  /// Accepts from ranks above cfg.rank, cfg.num_streams connections each.
  acceptor(unique_fd listener, handshake_config cfg);
  ~acceptor();
  acceptor(const acceptor&) = delete;
  acceptor& operator=(const acceptor&) = delete;

  /// Blocks until every expected connection arrived; fds[peer][stream] (empty for peers
  /// at or below our rank). Afterwards the acceptor refuses every newcomer.
  result<std::vector<std::vector<unique_fd>>> wait_inbound(clock::time_point deadline);
  /// Connections refused so far (wrong secret, unexpected, failed handshake, silent, evicted).
  int refused() const;
  /// Connections evicted so far to make room for a newcomer (counted in refused() too).
  int evicted() const;

 private:
  struct pending;  // one accepted connection until its handshake ends
  using pending_ptr = std::shared_ptr<pending>;
  using refusal = std::pair<std::string, std::string>;  // who, why

  /// Whether a pending connection may still be evicted: not once admitted (its client is about
  /// to be told it is in), nor once ended.
  static bool evictable(const pending& p);
  void run();
  /// Moves silent connections that spoke (or hung up) to the handshake queue and refuses those
  /// past their deadline. `revents[i]` is what poll saw on silent_[i].
  void sort_silent(const std::vector<short>& revents);
  /// Accepts one connection; false when the accept thread should stop.
  bool accept_one();
  /// Every handshake thread busy while connections that spoke wait for one: ends the handshakes
  /// that have held their thread for stuck_handshake, oldest first, one per waiting connection
  /// (mu_ held); what to log goes to `out`.
  void free_stuck_threads(clock::time_point now, std::vector<refusal>& out);
  /// Ends the oldest pending connection to make room (mu_ held); what to log, if one was found.
  std::optional<refusal> evict_oldest();
  /// Marks `p` ended and frees its slot (mu_ held).
  void end(pending& p);
  void work();
  void handle(const pending_ptr& p);
  /// Counts a refusal and logs it, at most a few lines per second (the rest are summed up):
  /// an error, or a warning where `dials_again` (no slot was free: a peer of the job retries).
  void refuse(const std::string& who, const std::string& why, bool dials_again = false);

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
  int evicted_ = 0;
  status resources_;  // set when accept() failed for lack of descriptors or memory
  std::vector<pending_ptr> silent_;       // no byte yet: polled by the accept thread only
  std::deque<pending_ptr> queue_;         // spoke: waiting for a handshake thread
  std::set<pending_ptr> handshaking_;     // with a thread (shut down to end them at stop)
  std::size_t pending_count_ = 0;         // silent_ + queue_ + handshaking_ not yet ended
  arrival_queue<pending> arrivals_;       // every pending connection, oldest first
  int idle_workers_ = 0;
  std::vector<std::thread> workers_;
  clock::time_point log_window_{};
  int logged_in_window_ = 0, unlogged_ = 0;
  std::thread thread_;
};

}  // namespace chorus::tcp
