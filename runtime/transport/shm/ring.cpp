// The ring's placement rule, publication and checks (protocol in ring.hpp).
#include "runtime/transport/shm/ring.hpp"

#include <atomic>
#include <cstring>
#include <string>

namespace chorus::shm {
namespace {
constexpr uint64_t header_size = wire::frame_header_size;

// Bytes skipped before a frame of `bytes` placed at stream position `at` (0: it fits here).
uint64_t padding(uint64_t at, uint64_t bytes, uint64_t capacity) {
  uint64_t pos = at % capacity;
  return pos + bytes > capacity ? capacity - pos : 0;
}
}  // namespace

bool ring_writer::put(const wire::frame_header& h, const std::byte* payload) {
  const uint64_t cap = seg_->capacity();
  const uint64_t bytes = header_size + h.length;
  if (bytes > cap) return false;
  const uint64_t skip = padding(head_, bytes, cap);
  const uint64_t released = seg_->released().load(std::memory_order_acquire);
  if (head_ + skip + bytes - released > cap) return false;
  if (skip >= header_size) {
    wire::frame_header pad;
    pad.kind = wire::frame_kind::shm_pad;
    pad.job_id = h.job_id;
    wire::encode(pad, seg_->data() + head_ % cap);
  }
  std::byte* at = seg_->data() + (head_ + skip) % cap;
  wire::encode(h, at);
  if (h.length) std::memcpy(at + header_size, payload, h.length);
  head_ += skip + bytes;
  return true;
}

bool ring_writer::publish() {
  if (head_ == published_) return false;
  published_ = head_;
  seg_->published().store(head_, std::memory_order_seq_cst);
  // Step 3: seq_cst on both sides; only the first publish after the receiver fell asleep sees
  // the flag (it clears it), so one doorbell per sleep.
  if (seg_->reader_sleeping().load(std::memory_order_seq_cst) == 0) return false;
  return seg_->reader_sleeping().exchange(0, std::memory_order_seq_cst) != 0;
}

result<bool> ring_reader::next(ring_frame& out) {
  const uint64_t cap = seg_->capacity();
  const uint64_t published = seg_->published().load(std::memory_order_acquire);
  auto bad = [&](const std::string& what) {
    return status{errc::protocol, "its shared-memory ring " + what + " (ring of " + std::to_string(cap) +
                                      " bytes, read up to " + std::to_string(tail_) + ", published " +
                                      std::to_string(published) + ")"};
  };
  if (published - tail_ > cap) return bad("claims more bytes than it holds");
  for (;;) {
    if (published == tail_) return false;
    uint64_t pos = tail_ % cap;
    if (cap - pos < header_size) {  // too little room for a header: the sender skipped it
      if (published - tail_ < cap - pos) return bad("ends inside the ring's tail");
      tail_ += cap - pos;
      continue;
    }
    if (published - tail_ < header_size) return bad("ends inside a frame header");
    auto h = wire::decode(seg_->data() + pos, header_size, limits_);
    if (!h) return bad("holds a bad frame: " + h.error().message());
    if (h->kind == wire::frame_kind::shm_pad) {
      if (h->length != 0 || published - tail_ < cap - pos) return bad("holds a bad padding frame");
      tail_ += cap - pos;
      continue;
    }
    if (h->kind != wire::frame_kind::data) return bad("holds a frame of another kind: " + wire::describe(*h));
    const uint64_t bytes = header_size + h->length;
    if (pos + bytes > cap || published - tail_ < bytes)
      return bad("holds a frame that does not fit: " + wire::describe(*h));
    out.header = *h;
    out.payload = seg_->data() + pos + header_size;
    frame_end_ = tail_ + bytes;
    return true;
  }
}

void ring_reader::consume() {
  if (frame_end_ <= tail_) return;
  tail_ = frame_end_;
  seg_->released().store(tail_, std::memory_order_release);
}

void ring_reader::set_sleeping(bool sleeping) {
  seg_->reader_sleeping().store(sleeping ? 1 : 0, std::memory_order_seq_cst);
}

}  // namespace chorus::shm
