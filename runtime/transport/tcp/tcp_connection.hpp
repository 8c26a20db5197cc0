// One stream to one peer over TCP (a stream_link): an Asio socket with a queue of outgoing
// frames (written in batches with one gather-write) and a read loop that puts each payload
// where the sink says. A shared-memory link (shm/shm_link.hpp) keeps one beside its rings for
// doorbells, goodbye, abort and frames too big for a ring; it tells the connection so
// (carry_signals_for), and the connection then accepts doorbells and lets the ring drain before
// a goodbye takes effect.
// Lives on the transport's I/O thread; no method may be called from another thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <asio.hpp>

#include "runtime/transport/frame_sink.hpp"
#include "runtime/transport/stream_link.hpp"
#include "runtime/transport/tcp/tcp_meter.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus::tcp {

class tcp_connection final : public stream_link {
 public:
  /// `scratch_bytes`: the receive scratch for frames that have no destination of their own
  /// (those to reduce); `pretouch`: allocated and touched now, else on the first such frame.
  tcp_connection(link_owner& owner, int fd, int peer, int stream, std::size_t scratch_bytes, bool pretouch = true);
  tcp_connection(const tcp_connection&) = delete;
  tcp_connection& operator=(const tcp_connection&) = delete;

  link_kind kind() const override { return link_kind::tcp; }
  int peer() const override { return peer_; }
  int stream() const override { return stream_; }

  void start_reading() override;
  void send(const wire::frame_header& h, const std::byte* payload) override;
  void cancel(uint64_t sequence) override;
  void send_goodbye() override;
  void send_abort(const std::string& reason) override;
  void close() override;

  /// This connection carries a shared-memory link's signals: doorbells (shm_wake frames, which
  /// are refused otherwise) and goodbye, before which `drain` takes what the peer put in the
  /// ring before it said goodbye.
  void carry_signals_for(std::function<void()> drain) { drain_before_goodbye_ = std::move(drain); }
  /// Whether frames can still be written (open, and no write has failed).
  bool writable() const { return open_ && !write_broken_; }

  bool open() const override { return open_; }
  bool goodbye_sent() const override { return goodbye_sent_; }
  bool goodbye_received() const override { return goodbye_received_; }
  std::size_t queued_frames() const override { return queue_.size(); }
  /// Bytes written / read so far; any thread (relaxed: for metrics, not for synchronisation).
  uint64_t bytes_sent() const override { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const override { return bytes_received_.load(std::memory_order_relaxed); }
  /// The kernel's count of this socket's sending (tcp_meter.hpp); any thread (zeros once closed).
  tcp_meter meter() const override { return read_tcp_meter(fd_); }
  /// Local and remote port of the socket (read once at construction); any thread.
  std::pair<int, int> ports() const override { return ports_; }

 private:
  struct outgoing {
    std::array<std::byte, wire::frame_header_size> head;
    wire::frame_header header;
    const std::byte* payload;
  };

  void start_write();
  void on_written(const asio::error_code& ec, std::size_t n);
  void read_header();
  void on_header(const asio::error_code& ec);
  void on_payload(const asio::error_code& ec, std::byte* where);
  void fail(const std::string& what, const asio::error_code& ec);
  /// Fails the peer, and tells it: "rank P stream S sent a bad frame: <what>".
  void bad_frame(const std::string& what);
  void release_queue();
  /// Makes the scratch hold at least `length` bytes (and at least scratch_bytes_ once it grows).
  void grow_scratch(std::size_t length);

  link_owner& owner_;
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
  // Frames per gather-write: small enough that forwarded segments are not held behind a long batch.
  static constexpr std::size_t max_batch = 8;
  std::array<std::array<std::byte, wire::frame_header_size>, max_batch> batch_heads_{};  // headers being written

  std::array<std::byte, wire::frame_header_size> read_head_{};
  wire::frame_header current_{};
  std::vector<std::byte> scratch_;
  std::size_t scratch_bytes_;   // what scratch_ grows to at least, when it grows
  std::byte no_payload_[1]{};   // where a frame without payload "lands" (never written)
  std::function<void()> drain_before_goodbye_;  // set: a shared-memory link's signals ride here
  std::string abort_reason_;  // outgoing: kept alive until written
  bool close_when_written_ = false;
  // A write failed (the peer closed): the read side, always waiting, reports first when it can
  // (an abort notice or a goodbye may still sit unread in the receive buffer); the failure
  // below is reported only if it has not after write_grace.
  bool write_broken_ = false;
  std::string write_failure_;
  bool write_timed_out_ = false;  // ... with ETIMEDOUT (our kernel gave up on the peer)
  std::unique_ptr<asio::steady_timer> write_grace_timer_;
  // Written by the I/O thread only (a plain load + store, no locked add), read by metrics.
  std::pair<int, int> ports_{0, 0};
  int fd_ = -1;  // the socket's descriptor, for TCP_INFO (meter())
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  void count(std::atomic<uint64_t>& c, std::size_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

}  // namespace chorus::tcp
