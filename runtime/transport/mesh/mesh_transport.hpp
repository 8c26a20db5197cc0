// The data plane of real processes: S streams to every other rank, each stream a link of the
// kind the link table gave that peer (transport/link_table.hpp): a TCP connection, or
// shared-memory rings with a TCP connection beside them (stream_link.hpp). One Asio I/O thread
// runs every link. With polled links (incoming rings) it polls them while there is work and
// for CHORUS_SHM_SPIN_US after, then sleeps until a socket, a timer, a post or a ring's
// doorbell wakes it. send() queues a frame on (peer, stream); received payloads go to the
// frame_sink. A broken link ends in peer_failed() for that peer, never a hang. Receivers route
// frames by (sequence, step, offset), whichever connection carried them.
// Built from the parts connect_mesh() made (mesh_connect.hpp); the control link is not part of
// it (the communicator owns that apart).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "runtime/transport/frame_sink.hpp"
#include "runtime/transport/mesh/mesh_connect.hpp"
#include "runtime/transport/stream_link.hpp"
#include "runtime/transport/transport.hpp"

namespace chorus::mesh {

class mesh_transport final : public transport, private link_owner {
 public:
  /// Takes the data streams, lanes and acceptor of `parts` (not its control connections).
  explicit mesh_transport(mesh_parts& parts);
  ~mesh_transport();
  mesh_transport(const mesh_transport&) = delete;
  mesh_transport& operator=(const mesh_transport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int num_streams() const override { return opts_.num_streams; }
  uint64_t job_id() const override { return limits_.job_id; }

  /// Starts the I/O thread; frames go to `sink` from then on.
  void start(frame_sink* sink) override;
  /// Runs `fn` on the I/O thread.
  void post(std::function<void()> fn) override { asio::post(io_, std::move(fn)); }
  bool on_io_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // ---- I/O thread only ----
  void send(int peer, int stream, const wire::frame_header& h, const std::byte* payload) override;
  void cancel(uint64_t sequence) override;
  void abort(const status& why) override;

  /// Any thread (the links' counters are relaxed atomics; the mesh is fixed after connect).
  stream_traffic traffic(int stream) const override;
  stream_traffic peer_traffic(int stream, int peer) const override;
  stream_meter meter(int stream) const override;
  std::pair<int, int> connection_ports(int stream, int peer) const override;
  link_use links() const override;

  /// Says goodbye to every peer, waits up to `grace` for theirs, closes, joins the I/O thread.
  /// Call from outside the I/O thread; idempotent.
  void close(std::chrono::milliseconds grace) override;
  void close() { close(std::chrono::seconds(5)); }
  /// How this rank reaches each peer (round 1's plan; a lane may still have fallen back).
  const link_table& table() const { return table_; }

 private:
  // link_owner
  asio::io_context& io() override { return io_; }
  const wire::frame_limits& limits() const override { return limits_; }
  frame_sink* sink() const override { return sink_; }
  void link_failed(int peer, const status& why, bool tell_peer) override;
  void goodbye_from(int peer) override;
  void finish_close_if_done() override;

  /// Every peer_timeout / 4 on the I/O thread: a link with frames waiting whose peer has
  /// taken no byte (TCP or ring) for peer_timeout fails naming the peer. Its heartbeats may
  /// still answer (the control link's own check does not see this): the peer is alive but its
  /// data plane does not read.
  void watch_writes();
  /// The I/O thread's loop: io_.run(), or with polled links the poll-and-spin loop above.
  void run_io();
  /// The link of (peer, stream), or null (our own rank, or out of range).
  const stream_link* link(int stream, int peer) const;

  int rank_;
  int size_;
  mesh_options opts_;
  wire::frame_limits limits_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  frame_sink* sink_ = nullptr;
  std::unique_ptr<tcp::acceptor> acceptor_;
  link_table table_;
  std::vector<std::vector<std::unique_ptr<stream_link>>> links_;  // [peer][stream]
  std::vector<bool> peer_down_;
  int shm_streams_ = 0;
  bool closing_ = false;
  bool closed_ = false;
  std::unique_ptr<asio::steady_timer> close_timer_;
  std::unique_ptr<asio::steady_timer> write_watch_;
  struct write_mark {
    uint64_t taken = 0;  // bytes the peer had taken when last seen moving
    std::chrono::steady_clock::time_point since{};
  };
  std::vector<std::vector<write_mark>> write_marks_;  // [peer][stream], I/O thread only
};

}  // namespace chorus::mesh
