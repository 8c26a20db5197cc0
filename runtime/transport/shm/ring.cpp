// The placement rule both sides of a ring follow.
#include "runtime/transport/shm/ring.hpp"

#include <atomic>

namespace chorus::shm {
namespace {
// Bytes skipped before a payload of `len` placed at stream position `at`.
uint64_t padding(uint64_t at, std::size_t len, std::size_t capacity) {
  uint64_t pos = at % capacity;
  return pos + len > capacity ? capacity - pos : 0;
}
}  // namespace

std::byte* ring_writer::reserve(std::size_t len) {
  std::size_t cap = seg_->capacity();
  if (len == 0 || len > cap) return nullptr;
  uint64_t start = head_ + padding(head_, len, cap);
  uint64_t released = seg_->released().load(std::memory_order_acquire);
  if (start + len - released > cap) return nullptr;
  head_ = start + len;
  return seg_->data() + start % cap;
}

void ring_writer::publish() { std::atomic_thread_fence(std::memory_order_release); }

const std::byte* ring_reader::next(std::size_t len) {
  std::size_t cap = seg_->capacity();
  if (len == 0 || len > cap) return nullptr;
  std::atomic_thread_fence(std::memory_order_acquire);
  uint64_t start = tail_ + padding(tail_, len, cap);
  tail_ = start + len;
  return seg_->data() + start % cap;
}

void ring_reader::release() { seg_->released().store(tail_, std::memory_order_release); }

}  // namespace chorus::shm
