// The mailbox's slots, checks and futex sleep (protocol in mailbox.hpp).
#include "runtime/transport/shm/mailbox.hpp"

#include <climits>
#include <cstring>
#include <string>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace chorus::shm {
namespace {

// Slot header: k u64 | bytes u64 | tag u64 | call u64, padded to a cache line; the payload follows.
constexpr std::size_t slot_header = 64;
constexpr std::size_t slot_stride = slot_header + mailbox_slot_bytes;

struct header {
  uint64_t k;
  uint64_t bytes;
  uint64_t tag;
  uint64_t call;
};

std::byte* slot(const segment& s, uint64_t k) { return s.data() + (k % 2) * slot_stride; }

// The word lies in a MAP_SHARED segment: a shared (not private) futex, so that the peer
// process's wake reaches us.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000000), static_cast<long>(limit.count() % 1000000) * 1000};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

std::size_t mailbox_capacity() { return 2 * slot_stride; }

bool mailbox_writer::has_room(uint64_t k) const {
  return k <= 2 || seg_->released().load(std::memory_order_acquire) >= k - 2;
}

void mailbox_writer::post(uint64_t k, uint64_t tag, const void* payload, std::size_t bytes, uint64_t call) {
  const std::span<const std::byte> whole{static_cast<const std::byte*>(payload), bytes};
  post(k, tag, std::span{&whole, 1}, call);
}

void mailbox_writer::post(uint64_t k, uint64_t tag, std::span<const std::span<const std::byte>> parts, uint64_t call) {
  std::byte* at = slot(*seg_, k);
  std::size_t bytes = 0;
  for (auto p : parts) {
    if (!p.empty()) std::memcpy(at + slot_header + bytes, p.data(), p.size());
    bytes += p.size();
  }
  header h{k, bytes, tag, call};
  std::memcpy(at, &h, sizeof h);
  seg_->published().store(k, std::memory_order_seq_cst);
  auto& sleeping = seg_->reader_sleeping();
  if (sleeping.load(std::memory_order_seq_cst) != 0 && sleeping.exchange(0, std::memory_order_seq_cst) != 0)
    futex_wake(sleeping);
}

const std::byte* mailbox_writer::posted(uint64_t k) const { return slot(*seg_, k) + slot_header; }

result<bool> mailbox_reader::take(uint64_t k, mail& out) const {
  const uint64_t published = seg_->published().load(std::memory_order_acquire);
  if (published < k) return false;
  auto bad = [&](const std::string& what) {
    return status{errc::protocol, "rank " + std::to_string(peer_) + "'s shared-memory mailbox " + what +
                                      " (expected post " + std::to_string(k) + ", published " +
                                      std::to_string(published) + ")"};
  };
  if (published > k + 1) return bad("ran more than one post ahead");
  header h{};
  std::memcpy(&h, slot(*seg_, k), sizeof h);
  if (h.k != k) return bad("holds post " + std::to_string(h.k) + " in the slot");
  if (h.bytes > mailbox_slot_bytes)
    return bad("claims " + std::to_string(h.bytes) + " bytes, more than its slot of " +
               std::to_string(mailbox_slot_bytes));
  out.bytes = h.bytes;
  out.tag = h.tag;
  out.call = h.call;
  out.payload = slot(*seg_, k) + slot_header;
  return true;
}

void mailbox_reader::release(uint64_t k) { seg_->released().store(k, std::memory_order_release); }

void mailbox_reader::sleep(uint64_t k, const std::atomic<bool>& stop, std::chrono::microseconds limit) {
  auto& sleeping = seg_->reader_sleeping();
  sleeping.store(1, std::memory_order_seq_cst);
  if (seg_->published().load(std::memory_order_seq_cst) < k && !stop.load(std::memory_order_seq_cst))
    futex_wait(sleeping, 1, limit);
  sleeping.store(0, std::memory_order_seq_cst);
}

void mailbox_reader::wake() {
  auto& sleeping = seg_->reader_sleeping();
  sleeping.store(0, std::memory_order_seq_cst);
  futex_wake(sleeping);
}

}  // namespace chorus::shm
