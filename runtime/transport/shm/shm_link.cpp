// Data frames through the rings, signals on TCP (shm_link.hpp).
#include "runtime/transport/shm/shm_link.hpp"

#include <cstring>

namespace chorus::shm {
namespace {
// A frame the ring cannot take yet waits for the receiver to hand back room, checking every
// ring_poll, up to ring_patience checks; then it goes on TCP. The receiver frees room as fast
// as it copies (tens of microseconds per segment) unless it is stalled.
constexpr auto ring_poll = std::chrono::microseconds(30);
constexpr int ring_patience = 64;
// Frames one poll() delivers at most, so that sockets and other rings get their turn.
constexpr std::size_t ring_batch = 16;
}  // namespace

shm_link::shm_link(link_owner& owner, std::unique_ptr<tcp::tcp_connection> signals, std::unique_ptr<ring_writer> out,
                   std::unique_ptr<ring_reader> in)
    : owner_(owner), tcp_(std::move(signals)), out_(std::move(out)), in_(std::move(in)), timer_(owner.io()) {
  tcp_->carry_signals_for([this] {
    while (poll() > 0) {
    }
  });
}

void shm_link::send(const wire::frame_header& h, const std::byte* payload) {
  if (h.kind != wire::frame_kind::data) {
    tcp_->send(h, payload);
    return;
  }
  if (out_ && out_->fits(h.length) && tcp_->writable()) {
    queue_.push_back({h, payload});
    if (!timer_pending_) flush();
    return;
  }
  if (out_) count(misses_, 1);  // too big for the ring
  tcp_->send(h, payload);
}

void shm_link::flush() {
  while (!queue_.empty()) {
    auto& w = queue_.front();
    if (!out_->put(w.header, w.payload)) {
      if (waited_ < ring_patience) break;
      // The receiver has kept the ring full for long: this one goes on TCP.
      waited_ = 0;
      count(misses_, 1);
      auto moved = w;
      queue_.pop_front();
      tcp_->send(moved.header, moved.payload);
      continue;
    }
    waited_ = 0;
    count(frames_, 1);
    count(ring_bytes_sent_, wire::frame_header_size + w.header.length);
    count(payload_bytes_sent_, w.header.length);
    sent_.push_back(w.header);
    queue_.pop_front();
  }
  if (out_->publish()) {  // the receiver sleeps: ring its doorbell
    wire::frame_header wake;
    wake.kind = wire::frame_kind::shm_wake;
    wake.job_id = owner_.limits().job_id;
    tcp_->send(wake, nullptr);
  }
  // sent() runs from the I/O loop, never inside the send() that queued the frame.
  if (!sent_.empty() && !sends_posted_) {
    sends_posted_ = true;
    asio::post(owner_.io(), [this] { finish_sends(); });
  }
  if (!queue_.empty()) {
    ++waited_;
    wait_for_room();
  }
}

void shm_link::finish_sends() {
  sends_posted_ = false;
  std::vector<wire::frame_header> done;
  done.swap(sent_);
  auto* sink = owner_.sink();
  for (auto& h : done) sink->sent(peer(), h);
}

void shm_link::wait_for_room() {
  timer_pending_ = true;
  timer_.expires_after(ring_poll);
  timer_.async_wait([this](const asio::error_code& ec) {
    timer_pending_ = false;
    if (ec || !tcp_->writable() || queue_.empty()) return;
    flush();
  });
}

std::size_t shm_link::poll() {
  std::size_t n = 0;
  auto* sink = owner_.sink();
  while (tcp_->open() && in_ && n < ring_batch) {
    ring_frame f;
    auto got = in_->next(f);
    if (!got) {
      owner_.link_failed(peer(),
                         status{errc::protocol, "rank " + std::to_string(peer()) + " stream " +
                                                    std::to_string(stream()) + " sent a bad frame: " + got.error().message()},
                         true);
      break;
    }
    if (!*got) break;
    count(ring_bytes_received_, wire::frame_header_size + f.header.length);
    std::byte* where = f.header.length ? sink->destination(peer(), f.header) : nullptr;
    if (where) std::memcpy(where, f.payload, f.header.length);
    // Without a destination the sink reads the ring in place (e.g. reduces from it) before
    // delivered() returns; only then may the sender reuse those bytes.
    sink->delivered(peer(), f.header, where ? where : const_cast<std::byte*>(f.payload));
    in_->consume();
    ++n;
  }
  return n;
}

void shm_link::cancel(uint64_t sequence) {
  // sent() may queue new frames: collect first, report after.
  std::vector<wire::frame_header> dropped;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->header.sequence == sequence) {
      dropped.push_back(it->header);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  auto* sink = owner_.sink();
  for (auto& h : dropped) sink->sent(peer(), h);
  tcp_->cancel(sequence);
}

void shm_link::release_queue() {
  auto* sink = owner_.sink();
  while (!queue_.empty()) {
    auto h = queue_.back().header;
    queue_.pop_back();
    if (sink) sink->sent(peer(), h);
  }
}

void shm_link::close() {
  asio::error_code ignored;
  timer_.cancel();
  tcp_->close();
  release_queue();
}

}  // namespace chorus::shm
