// One stream to a peer on the same host (a stream_link): data frames go whole through a pair of
// shared-memory rings (ring.hpp), so they never touch the kernel's TCP path. A TCP connection
// beside the rings carries what they cannot: the doorbell of a sleeping receiver (ring.hpp
// step 3), goodbye and abort, and a frame too big for the ring or one the ring refused for
// long. Its EOF still tells at once that the peer's process is gone.
// Lives on the transport's I/O thread, like every link.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <vector>

#include <asio.hpp>

#include "runtime/transport/shm/ring.hpp"
#include "runtime/transport/stream_link.hpp"
#include "runtime/transport/tcp/tcp_connection.hpp"

namespace chorus::shm {

class shm_link final : public stream_link {
 public:
  /// `out` / `in`: the rings to / from the peer (at least one); `signals`: the stream's TCP
  /// connection to the same peer.
  shm_link(link_owner& owner, std::unique_ptr<tcp::tcp_connection> signals, std::unique_ptr<ring_writer> out,
           std::unique_ptr<ring_reader> in);
  shm_link(const shm_link&) = delete;
  shm_link& operator=(const shm_link&) = delete;

  link_kind kind() const override { return link_kind::shm; }
  int peer() const override { return tcp_->peer(); }
  int stream() const override { return tcp_->stream(); }

  void start_reading() override { tcp_->start_reading(); }
  void send(const wire::frame_header& h, const std::byte* payload) override;
  bool polled() const override { return in_ != nullptr; }
  std::size_t poll() override;
  void set_sleeping(bool sleeping) override {
    if (in_) in_->set_sleeping(sleeping);
  }
  void cancel(uint64_t sequence) override;
  void send_goodbye() override { tcp_->send_goodbye(); }
  void send_abort(const std::string& reason) override { tcp_->send_abort(reason); }
  void close() override;

  bool open() const override { return tcp_->open(); }
  bool goodbye_sent() const override { return tcp_->goodbye_sent(); }
  bool goodbye_received() const override { return tcp_->goodbye_received(); }
  std::size_t queued_frames() const override { return tcp_->queued_frames() + queue_.size(); }

  uint64_t bytes_sent() const override { return tcp_->bytes_sent() + load(ring_bytes_sent_); }
  uint64_t bytes_received() const override { return tcp_->bytes_received() + load(ring_bytes_received_); }
  uint64_t shm_bytes_sent() const override { return load(payload_bytes_sent_); }
  uint64_t shm_frames() const override { return load(frames_); }
  uint64_t shm_misses() const override { return load(misses_); }
  tcp::tcp_meter meter() const override { return tcp_->meter(); }
  std::pair<int, int> ports() const override { return tcp_->ports(); }

 private:
  struct waiting {
    wire::frame_header header;
    const std::byte* payload;
  };
  /// Puts the frames of queue_ into the ring while it has room, publishes them, rings the
  /// doorbell if the receiver sleeps, and schedules their sent(); a frame the ring has refused
  /// for ring_patience checks goes on TCP.
  void flush();
  void finish_sends();
  void wait_for_room();
  void release_queue();
  static uint64_t load(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }
  // Written by the I/O thread only (a plain load + store, no locked add), read by metrics.
  static void count(std::atomic<uint64_t>& c, std::size_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  link_owner& owner_;
  std::unique_ptr<tcp::tcp_connection> tcp_;
  std::unique_ptr<ring_writer> out_;
  std::unique_ptr<ring_reader> in_;
  std::deque<waiting> queue_;              // data frames waiting for room in the ring
  std::vector<wire::frame_header> sent_;   // in the ring, sent() not yet called
  bool sends_posted_ = false;              // finish_sends() is posted
  asio::steady_timer timer_;
  bool timer_pending_ = false;  // queue_'s head waits for room
  int waited_ = 0;              // checks so far for queue_'s head
  std::atomic<uint64_t> ring_bytes_sent_{0};      // headers and payloads
  std::atomic<uint64_t> ring_bytes_received_{0};  // headers and payloads
  std::atomic<uint64_t> payload_bytes_sent_{0};
  std::atomic<uint64_t> frames_{0};
  std::atomic<uint64_t> misses_{0};
};

}  // namespace chorus::shm
