// One stream to one peer: an Asio socket with a queue of outgoing frames (written in batches
// with one gather-write) and a read loop that puts each payload where the sink says. To a peer
// on the same host, data frames go whole through shared-memory rings when they fit
// (shm/ring.hpp): the socket then carries only the ring's doorbell, goodbyes and aborts, and
// still tells at once when the peer's process is gone.
// Lives on the transport's I/O thread; no method may be called from another thread.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "runtime/transport/frame_sink.hpp"
#include "runtime/transport/shm/ring.hpp"
#include "runtime/transport/tcp/tcp_meter.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus::tcp {

class tcp_transport;

class tcp_connection {
 public:
  /// `shm_out` / `shm_in`: this stream's rings to / from the peer, or null (TCP only).
  tcp_connection(tcp_transport& owner, int fd, int peer, int stream, std::size_t scratch_bytes,
                 std::unique_ptr<shm::ring_writer> shm_out = nullptr, std::unique_ptr<shm::ring_reader> shm_in = nullptr);
  tcp_connection(const tcp_connection&) = delete;
  tcp_connection& operator=(const tcp_connection&) = delete;

  void start_reading();
  /// Queues a frame; `payload` (h.length bytes) must stay valid until the sink's sent().
  void send(const wire::frame_header& h, const std::byte* payload);
  /// Delivers the frames waiting in the incoming ring (none without one); returns how many.
  std::size_t poll_ring();
  bool has_ring_in() const { return shm_in_ != nullptr; }
  /// The receiver's half of the ring's doorbell (ring.hpp step 3).
  void ring_sleeping(bool sleeping) {
    if (shm_in_) shm_in_->set_sleeping(sleeping);
  }
  /// Drops queued frames of `sequence` that are not being written yet (sink's sent() for each).
  void cancel(uint64_t sequence);
  void send_goodbye();
  /// Sends the reason the job is broken and closes once it is written.
  void send_abort(const std::string& reason);
  void close();

  int peer() const { return peer_; }
  int stream() const { return stream_; }
  /// The kernel's count of this socket's sending (tcp_meter.hpp); any thread (zeros once closed).
  tcp_meter meter() const { return read_tcp_meter(fd_); }
  /// Local and remote port of the socket (read once at construction); any thread.
  std::pair<int, int> ports() const { return ports_; }
  bool open() const { return open_; }
  bool goodbye_sent() const { return goodbye_sent_; }
  bool goodbye_received() const { return goodbye_received_; }
  std::size_t queued_frames() const { return queue_.size() + ring_queue_.size(); }
  /// Bytes written / read so far; any thread (relaxed: for metrics, not for synchronisation).
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }
  /// Data frames sent through the ring / on TCP although a ring exists (too big for it, or it
  /// stayed full); any thread.
  uint64_t shm_frames() const { return shm_frames_.load(std::memory_order_relaxed); }
  uint64_t shm_misses() const { return shm_misses_.load(std::memory_order_relaxed); }
  uint64_t shm_bytes_sent() const { return shm_bytes_sent_.load(std::memory_order_relaxed); }

 private:
  struct outgoing {
    std::array<std::byte, wire::frame_header_size> head;
    wire::frame_header header;
    const std::byte* payload;
  };

  void send_tcp(outgoing o);
  void start_write();
  void on_written(const asio::error_code& ec, std::size_t n);
  void read_header();
  void on_header(const asio::error_code& ec);
  void on_payload(const asio::error_code& ec, std::byte* where);
  /// Puts the frames of ring_queue_ into the ring while it has room, publishes them, rings the
  /// doorbell if the receiver sleeps, and schedules their sent(); a frame the ring has refused
  /// for ring_patience checks goes on TCP.
  void flush_ring();
  void finish_ring_sends();
  void wait_for_ring();
  void fail(const std::string& what, const asio::error_code& ec);
  /// Fails the peer, and tells it: "rank P stream S sent a bad frame: <what>".
  void bad_frame(const std::string& what);
  void release_queue();

  tcp_transport& owner_;
  asio::ip::tcp::socket socket_;
  int peer_;
  int stream_;
  bool open_ = true;
  bool goodbye_sent_ = false;
  bool goodbye_received_ = false;

  std::deque<outgoing> queue_;
  std::size_t in_flight_ = 0;  // frames at the queue's head being written now
  bool completing_ = false;    // on_written is handing finished frames to the sink
  std::vector<asio::const_buffer> write_bufs_;

  std::array<std::byte, wire::frame_header_size> read_head_{};
  wire::frame_header current_{};
  std::vector<std::byte> scratch_;
  std::unique_ptr<shm::ring_writer> shm_out_;
  std::unique_ptr<shm::ring_reader> shm_in_;
  std::deque<outgoing> ring_queue_;              // data frames waiting for room in the ring
  std::vector<wire::frame_header> ring_sent_;    // in the ring, sent() not yet called
  bool ring_sends_posted_ = false;               // finish_ring_sends() is posted
  std::unique_ptr<asio::steady_timer> ring_timer_;
  bool ring_timer_pending_ = false;  // ring_queue_'s head waits for ring room
  int ring_waited_ = 0;               // checks so far for ring_queue_'s head
  std::string abort_reason_;  // outgoing: kept alive until written
  bool close_when_written_ = false;
  // A write failed (the peer closed): the read side, always waiting, reports first when it can
  // (an abort notice or a goodbye may still sit unread in the receive buffer); the failure
  // below is reported only if it has not after write_grace.
  bool write_broken_ = false;
  std::string write_failure_;
  std::unique_ptr<asio::steady_timer> write_grace_timer_;
  // Written by the I/O thread only (a plain load + store, no locked add), read by metrics.
  std::pair<int, int> ports_{0, 0};
  int fd_ = -1;  // the socket's descriptor, for TCP_INFO (meter())
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> shm_frames_{0};
  std::atomic<uint64_t> shm_misses_{0};
  std::atomic<uint64_t> shm_bytes_sent_{0};
  void count(std::atomic<uint64_t>& c, std::size_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

}  // namespace chorus::tcp
