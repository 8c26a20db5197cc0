// Post, wait, fold in rank order (mailbox_allreduce.hpp).
#include "runtime/collectives/mailbox_allreduce.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/collectives/reduce.hpp"
#include "runtime/compression/cast.hpp"

namespace chorus {
namespace {

// A sleeping caller looks again this often even without a wake-up (belt and braces: the
// writer's and interrupt()'s wake-ups are what end a sleep).
constexpr auto sleep_limit = std::chrono::milliseconds(100);
// Checks before the caller starts yielding its core between looks: a post from a peer that
// runs on the other core lands within a few hundred nanoseconds.
constexpr unsigned busy_checks = 8;

uint64_t tag_of(dtype t, reduce_op op) { return uint64_t{static_cast<uint8_t>(t)} << 8 | static_cast<uint8_t>(op); }

// A post's tag: the whole buffer's bytes << 16 | dtype << 8 | op.
std::string describe(uint64_t tag) {
  const uint64_t t = (tag >> 8) & 0xff, op = tag & 0xff;
  std::string out = std::to_string(tag >> 16) + " bytes of ";
  out += t < dtype_count ? std::string(name_of(static_cast<dtype>(t))) : "dtype #" + std::to_string(t);
  out += " ";
  out += op < reduce_op_count ? std::string(name_of(static_cast<reduce_op>(op))) : "op #" + std::to_string(op);
  return out;
}

// The concatenation of run()'s regions, taken front to back in pieces: next(n) gives the parts
// of the regions that make up the next n bytes (valid until the next call).
class region_walk {
 public:
  explicit region_walk(std::span<const std::span<std::byte>> regions) : regions_(regions) {}
  std::span<const std::span<std::byte>> next(std::size_t bytes) {
    parts_.clear();
    while (bytes > 0 && index_ < regions_.size()) {
      auto rest = regions_[index_].subspan(offset_);
      auto take = std::min(bytes, rest.size());
      if (take) parts_.push_back(rest.first(take));
      offset_ += take;
      bytes -= take;
      if (offset_ == regions_[index_].size()) {
        ++index_;
        offset_ = 0;
      }
    }
    return parts_;
  }

 private:
  std::span<const std::span<std::byte>> regions_;
  std::size_t index_ = 0, offset_ = 0;
  std::vector<std::span<std::byte>> parts_;
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

mailbox_allreduce::mailbox_allreduce(int rank, int size, std::vector<std::unique_ptr<shm::mailbox_writer>> out,
                                   std::vector<std::unique_ptr<shm::mailbox_reader>> in, std::size_t limit,
                                   std::chrono::microseconds spin)
    : rank_(rank),
      size_(size),
      out_(std::move(out)),
      in_(std::move(in)),
      limit_(limit),
      spin_(spin),
      stop_(new std::atomic<bool>[static_cast<std::size_t>(std::max(size, 1))]),
      left_(static_cast<std::size_t>(std::max(size, 1))) {
  for (int p = 0; p < std::max(size, 1); ++p) stop_[static_cast<std::size_t>(p)].store(false);
}

std::size_t mailbox_allreduce::max_bytes() const {
  if (size_ < 2 || limit_ == 0) return 0;
  return size_ == 2 ? SIZE_MAX : limit_ / static_cast<std::size_t>(size_ - 2);
}

bool mailbox_allreduce::takes(std::size_t most, std::size_t bytes, dtype t, reduce_op op) {
  // Booleans have no average: the I/O thread's path refuses it with its own error. most = 0:
  // one rank, or the path switched off.
  return most > 0 && bytes <= most && !(t == dtype::boolean && op == reduce_op::average);
}

status mailbox_allreduce::stop_reason(int peer) const {
  std::lock_guard lk(why_mu_);
  return why_.ok() ? left_[static_cast<std::size_t>(peer)] : why_;
}

void mailbox_allreduce::interrupt(const status& why) {
  {
    std::lock_guard lk(why_mu_);
    if (why_.ok()) why_ = why;
  }
  broken_.store(true, std::memory_order_seq_cst);
  for (int p = 0; p < size_; ++p) {
    stop_[static_cast<std::size_t>(p)].store(true, std::memory_order_seq_cst);
    if (in_[static_cast<std::size_t>(p)]) in_[static_cast<std::size_t>(p)]->wake();
  }
}

void mailbox_allreduce::peer_left(int peer, const status& why) {
  if (peer < 0 || peer >= size_ || peer == rank_) return;
  {
    std::lock_guard lk(why_mu_);
    if (left_[static_cast<std::size_t>(peer)].ok()) left_[static_cast<std::size_t>(peer)] = why;
  }
  stop_[static_cast<std::size_t>(peer)].store(true, std::memory_order_seq_cst);
  if (in_[static_cast<std::size_t>(peer)]) in_[static_cast<std::size_t>(peer)]->wake();
}

status mailbox_allreduce::wait_for(int peer, uint64_t k, shm::mail& m) {
  auto& box = *in_[static_cast<std::size_t>(peer)];
  auto& stop = stop_[static_cast<std::size_t>(peer)];
  const auto spin_until = std::chrono::steady_clock::now() + spin_;
  for (unsigned i = 0;; ++i) {
    auto got = box.take(k, m);
    if (!got) return got.error();
    if (*got) return {};
    if (stop.load(std::memory_order_seq_cst)) {
      // A post made before the peer left still counts (it finished this allreduce).
      got = box.take(k, m);
      if (got && *got) return {};
      return stop_reason(peer);
    }
    if (i < busy_checks) cpu_relax();
    else if (std::chrono::steady_clock::now() < spin_until) std::this_thread::yield();
    else box.sleep(k, stop, sleep_limit);
  }
}

status mailbox_allreduce::wait_for_room(int peer, uint64_t k) {
  auto& box = *out_[static_cast<std::size_t>(peer)];
  while (!box.has_room(k)) {
    if (stop_[static_cast<std::size_t>(peer)].load(std::memory_order_seq_cst)) return stop_reason(peer);
    std::this_thread::yield();
  }
  return {};
}

status mailbox_allreduce::run(void* data, std::size_t count, dtype t, reduce_op op, uint64_t call,
                              nonfinite_report* check) {
  const std::span<std::byte> whole{static_cast<std::byte*>(data), count * size_of(t)};
  return run(std::span{&whole, 1}, t, op, call, check);
}

status mailbox_allreduce::run(std::span<const std::span<std::byte>> regions, dtype t, reduce_op op, uint64_t call,
                              nonfinite_report* check) {
  std::lock_guard lk(run_mu_);
  if (broken_.load(std::memory_order_seq_cst)) return stop_reason(rank_);
  const std::size_t elem = size_of(t);
  std::size_t bytes = 0;
  for (auto r : regions) bytes += r.size();
  // A buffer larger than a slot goes in pieces of whole elements, one post each; every rank
  // cuts it alike. The tag carries the whole buffer's size, so that a peer's different call is
  // named as such rather than as a different piece.
  const std::size_t per_post = shm::mailbox_slot_bytes / elem * elem;
  const uint64_t tag = tag_of(t, op) | uint64_t{bytes} << 16;
  const std::size_t pieces = bytes == 0 ? 1 : (bytes + per_post - 1) / per_post;
  auto length = [&](std::size_t i) { return std::min(per_post, bytes - i * per_post); };
  region_walk posting(regions), folding(regions);
  const uint64_t first = k_ + 1;
  k_ += pieces;
  // Only floating types can hold NaN/Inf; the others skip the check's work.
  const bool checks = check && (t == dtype::f16 || t == dtype::bf16 || t == dtype::f32 || t == dtype::f64);
  std::vector<uint64_t> bad(checks ? (static_cast<std::size_t>(size_) + 63) / 64 : 0, 0);
  // Piece i + 1 goes out before piece i is folded (the mailbox's second slot holds it), so a
  // peer folds one piece while we fold the one before.
  if (auto st = post_piece(first, posting.next(length(0)), tag, call); !st.ok()) return st;
  for (std::size_t i = 0; i < pieces; ++i) {
    if (i + 1 < pieces)
      if (auto st = post_piece(first + i + 1, posting.next(length(i + 1)), tag, call); !st.ok()) return st;
    if (auto st = fold_piece(first + i, folding.next(length(i)), length(i), t, op, tag, call, checks ? &bad : nullptr);
        !st.ok())
      return st;
  }
  if (checks) check->merge(bad);
  return {};
}

status mailbox_allreduce::post_piece(uint64_t k, std::span<const std::span<std::byte>> parts, uint64_t tag,
                                    uint64_t call) {
  gather_.assign(parts.begin(), parts.end());
  std::size_t bytes = 0;
  for (auto p : parts) bytes += p.size();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (auto st = wait_for_room(p, k); !st.ok()) return st;
    out_[static_cast<std::size_t>(p)]->post(k, tag, gather_, call);
  }
  posts_.fetch_add(1, std::memory_order_relaxed);
  sent_bytes_.fetch_add(bytes * static_cast<uint64_t>(size_ - 1), std::memory_order_relaxed);
  return {};
}

status mailbox_allreduce::fold_piece(uint64_t k, std::span<const std::span<std::byte>> parts, std::size_t bytes,
                                    dtype t, reduce_op op, uint64_t tag, uint64_t call, std::vector<uint64_t>* bad) {
  const std::size_t elem = size_of(t);
  auto mark = [bad](int r) { (*bad)[static_cast<std::size_t>(r) / 64] |= uint64_t{1} << (r % 64); };
  // The check of a float sum (average: the same sum) rides in the last addition, which sees
  // the final sum: non-finite wherever any rank's input was (add_check_sum). Only then is
  // each input scanned to name its rank, so the peers' posts are kept until the fold ends.
  // Other checked folds scan each input as it comes (our own: before anything is folded in).
  const bool on_sum = bad && (t == dtype::f32 || t == dtype::f64) && (op == reduce_op::sum || op == reduce_op::average);
  if (bad && !on_sum)
    for (auto p : parts)
      if (has_nonfinite(p.data(), t, p.size() / elem)) mark(rank_);
  bool sum_nonfinite = false;
  const int last = size_ == 2 ? 1 - rank_ : size_ - 1;  // the rank whose post is added last
  // Theirs, folded in rank order so that every rank computes the same bits. With two ranks the
  // one combination is commutative bit for bit (reduce.hpp): each folds the other in.
  if (size_ > 2 && bytes) {
    mine_.resize(bytes);
    std::size_t at = 0;
    for (auto p : parts) {
      std::memcpy(mine_.data() + at, p.data(), p.size());
      at += p.size();
    }
  }
  for (int q = 0; q < size_; ++q) {
    const std::byte* src = mine_.data();
    shm::mail m;
    if (q != rank_) {
      if (auto st = wait_for(q, k, m); !st.ok()) return st;
      if (m.bytes != bytes || m.tag != tag || m.call != call) {
        // Call numbers only where they differ (the same call of another size needs none).
        const bool numbered = m.call != call;
        return status{errc::protocol, "allreduce " + (numbered ? "#" + std::to_string(call) + " " : std::string()) +
                                          "of " + describe(tag) + " on rank " + std::to_string(rank_) + ", but rank " +
                                          std::to_string(q) + " posted " +
                                          (numbered ? "#" + std::to_string(m.call) + ", " : std::string()) +
                                          describe(m.tag) +
                                          ": every rank must make the same collective calls in the same order"};
      }
      src = m.payload;
      if (bad && !on_sum && has_nonfinite(src, t, bytes / elem)) mark(q);
    }
    for (auto p : parts) {
      const std::size_t count = p.size() / elem;
      if (size_ == 2 ? q != rank_ : q != 0) {
        if (on_sum && q == last) sum_nonfinite = add_check_sum(p.data(), src, t, count) || sum_nonfinite;
        else reduce_into(p.data(), src, count, t, op);
      } else if (q != rank_ && !p.empty()) {  // q == 0 of more than two: its input starts the fold
        std::memcpy(p.data(), src, p.size());
      }
      src += p.size();
    }
    if (q != rank_ && !on_sum) in_[static_cast<std::size_t>(q)]->release(k);
  }
  if (on_sum) {
    // Rare: some input held NaN/Inf (or the sum overflowed, which names no one). Every input of
    // this piece is still at hand: the peers' posts, and ours as we posted it.
    if (sum_nonfinite)
      for (int q = 0; q < size_; ++q) {
        shm::mail m;
        const std::byte* input = nullptr;
        if (q == rank_) input = out_[static_cast<std::size_t>(rank_ == 0 ? 1 : 0)]->posted(k);
        else if (auto got = in_[static_cast<std::size_t>(q)]->take(k, m); got && *got) input = m.payload;
        if (input && has_nonfinite(input, t, bytes / elem)) mark(q);
      }
    for (int q = 0; q < size_; ++q)
      if (q != rank_) in_[static_cast<std::size_t>(q)]->release(k);
  }
  if (op == reduce_op::average)
    for (auto p : parts) divide_by(p.data(), p.size() / elem, t, size_);
  return {};
}

}  // namespace chorus
