// The control link: one authenticated TCP connection to every peer for small control messages
// (the negotiators' gossip), apart from the data plane's bulk streams. mesh::connect_mesh
// opens it with the mesh (one more connection per peer, through the same handshake) and hands
// it to whoever carries control messages: the pipeline turns what arrives into actor messages
// for its negotiator (actors/control_edge.hpp). Latency over throughput:
//   - send() writes from the caller's thread with a non-blocking send(2); only bytes the kernel
//     does not take at once wait for the link's thread. It never blocks.
//   - one thread sleeps in poll(2) on every connection, decodes frames and calls on_message on
//     that thread, in the order the peer sent them.
// Frames are data-plane frames (wire/frame.hpp): kind control (payload: kind u8 | origin i32 LE
// | bytes) and goodbye. A connection ends cleanly with a goodbye each way (a link answers a
// peer's goodbye with its own at once); anything else (EOF without a goodbye, a reset, a frame
// that fails validation) ends it with on_closed(peer, why, false), why naming the peer. A frame
// that fails validation is answered with an abort frame giving the reason, so that the sender's
// on_closed says what was wrong with what it sent.
// Liveness: with a peer timeout T the link's thread sends every peer a heartbeat frame every
// T/6 and ends a connection that brought nothing (no message, no heartbeat) for T, naming the
// peer as frozen or unreachable. The thread is the runtime's own, so a rank whose training
// thread is busy for minutes still answers; a stopped process (SIGSTOP, a hung host) or a
// partitioned network does not.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/transport/tcp/control_frames.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus::tcp {

class control_link {
 public:
  struct handlers {
    /// A control message from `peer`, as the peer passed it to send().
    std::function<void(int peer, uint8_t kind, int32_t origin, std::vector<uint8_t> data)> on_message;
    /// The connection to `peer` ended: after its goodbye (clean), or not (why names the peer
    /// and the cause). At most once per peer.
    std::function<void(int peer, const status& why, bool clean)> on_closed;
  };

  /// `fds[p]`: the authenticated connection to rank p (empty for our own rank).
  /// `peer_timeout`: see Liveness above; zero turns heartbeats and the deadline off.
  /// `hosts[p]`: rank p's host name, which errors about rank p give beside its number (empty
  /// or missing: the number alone; mesh_connect gives them where the job spans hosts).
  control_link(int rank, std::vector<unique_fd> fds, const wire::frame_limits& limits,
               std::chrono::milliseconds peer_timeout = {}, std::vector<std::string> hosts = {});
  ~control_link();
  control_link(const control_link&) = delete;
  control_link& operator=(const control_link&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(conns_.size()); }

  /// Starts the thread; handlers are called on it from then on. Once.
  void start(handlers h);
  /// Sends one message to `to`. Any thread; never blocks. False when the connection to `to`
  /// is closed (the peer left, or the link is closing): the message is dropped.
  bool send(int to, uint8_t kind, int32_t origin, std::span<const uint8_t> data);
  /// A control frame's payload: kind u8 | origin i32 | data.
  static constexpr std::size_t message_head = 5;
  /// The largest `data` send() carries: the frame limit less the message's own head.
  std::size_t max_message_bytes() const { return limits_.max_payload - message_head; }
  /// Says goodbye to every peer, waits up to `grace` for theirs (or their connection's end),
  /// then stops the thread and closes every connection. No handler runs after it began.
  /// Call from outside the handlers; idempotent.
  void close(std::chrono::milliseconds grace = std::chrono::seconds(1));
  /// Bytes still waiting for the kernel to take them, over all connections (tests).
  std::size_t backlog_bytes();

 private:
  struct conn;
  /// "rank 3", or "rank 3 on <host>" where its host name is known.
  std::string who(int peer) const;
  void run();
  void read_from(conn& c);
  void flush(conn& c);
  /// Nothing more can be read or written on `c`: reports `why` (not clean).
  void end(conn& c, const status& why);
  /// A frame from `c` is refused: tells the peer `why` in an abort frame, then end(c, why).
  void refuse(conn& c, const status& why);
  /// " (writing to it had failed: <why>)" when a write to `c` failed first, else "".
  static std::string write_note(conn& c);
  /// Calls on_closed once per peer, unless the link is closing.
  void report(conn& c, const status& why, bool clean);
  void say_goodbye(conn& c);
  void wake();
  bool settled();
  /// Sends due heartbeats and ends connections silent past the timeout; returns the poll
  /// timeout (ms) until the next thing due, or -1 with liveness off.
  int keep_alive();

  int rank_;
  std::vector<std::string> hosts_;  // [peer]: its host name, for messages (may be empty)
  wire::frame_limits limits_;
  std::chrono::milliseconds peer_timeout_;
  std::chrono::milliseconds beat_interval_;
  clock::time_point next_beat_{};
  std::vector<std::unique_ptr<conn>> conns_;  // by rank; null for ours
  unique_fd wake_;                             // eventfd: new backlog, or close
  handlers handlers_;
  std::atomic<bool> closing_{false};
  clock::time_point close_deadline_{};  // written before closing_ is set
  std::mutex close_mu_;
  bool closed_ = false;
  std::thread thread_;
};

}  // namespace chorus::tcp
