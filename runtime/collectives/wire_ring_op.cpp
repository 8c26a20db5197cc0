// Compressed / checked ring: segment-level forwarding as in ring_op.cpp, with casts on the way
// out, f32 accumulation on the way in, one cast of each final value by its owner, and the
// flag ring of the NaN/Inf check (frames with steps after the data steps).
#include "runtime/collectives/wire_ring_op.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "runtime/collectives/reduce.hpp"

namespace chorus {

namespace {
// Freed scratch, kept for the next ops (at most `keep` buffers; the largest are kept).
struct scratch_pool {
  static constexpr std::size_t keep = 64;
  std::mutex mu;
  std::vector<std::pair<std::size_t, std::unique_ptr<std::byte[]>>> free;
};
scratch_pool& pool() {
  static scratch_pool* p = new scratch_pool;  // never destroyed: ops may end during exit
  return *p;
}
}  // namespace

wire_scratch::wire_scratch(std::size_t bytes) {
  if (bytes == 0) return;
  auto& pl = pool();
  {
    std::lock_guard lk(pl.mu);
    std::size_t best = pl.free.size();
    for (std::size_t i = 0; i < pl.free.size(); ++i)
      if (pl.free[i].first >= bytes && (best == pl.free.size() || pl.free[i].first < pl.free[best].first)) best = i;
    if (best < pl.free.size()) {
      cap_ = pl.free[best].first;
      p_ = std::move(pl.free[best].second);
      pl.free.erase(pl.free.begin() + static_cast<std::ptrdiff_t>(best));
      return;
    }
  }
  p_.reset(new std::byte[bytes]);
  cap_ = bytes;
}

wire_scratch::~wire_scratch() {
  if (!p_) return;
  auto& pl = pool();
  std::lock_guard lk(pl.mu);
  if (pl.free.size() < scratch_pool::keep) {
    pl.free.emplace_back(cap_, std::move(p_));
    return;
  }
  auto smallest = std::min_element(pl.free.begin(), pl.free.end(),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (smallest->first < cap_) *smallest = {cap_, std::move(p_)};
}

wire_scratch& wire_scratch::operator=(wire_scratch&& o) noexcept {
  if (this != &o) {
    wire_scratch old(std::move(*this));
    p_ = std::move(o.p_);
    cap_ = o.cap_;
    o.cap_ = 0;
  }
  return *this;
}

namespace {
// Plain (uncompressed) prescale: own data times `scale`, in place.
void scale_in_place(std::byte* p, std::size_t n, dtype t, float scale) {
  if (t == dtype::f32) {
    for (std::size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      v *= scale;
      std::memcpy(p + 4 * i, &v, 4);
    }
  } else if (t == dtype::f64) {
    for (std::size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      v *= double(scale);
      std::memcpy(p + 8 * i, &v, 8);
    }
  }
}
}  // namespace

wire_ring_op::wire_ring_op(uint64_t sequence, int stream, int rank, int size, std::byte* base,
                           std::vector<elem_range> blocks, std::vector<ring_step> steps, dtype t, reduce_op op,
                           std::size_t segment_bytes, int owned_divisor, int own_block, wire_options opts)
    : ring_chunk_op(sequence, stream, rank, size, base, std::move(blocks), std::move(steps), t, op),
      esize_(size_of(t)),
      unit_(opts.wire != compression::none ? 2 : size_of(t)),
      divisor_(owned_divisor),
      own_block_(own_block),
      opts_(std::move(opts)) {
  seg_elems_ = std::max<std::size_t>(1, segment_bytes / unit_);
  std::size_t total = 0, extent = 0;
  for (auto& b : blocks_) {
    total += b.count;
    extent = std::max(extent, b.offset + b.count);
  }
  const bool reduces = steps_.empty() || steps_.front().reduce;
  if (compressed()) {
    gather_wire_ = wire_scratch(extent * 2);
    if (reduces) send_wire_ = wire_scratch(extent * 2);
    if (reduces && dtype_ == dtype::f64) acc64_ = wire_scratch(extent * sizeof(float));
  }
  if (opts_.check) {
    own_left_ = reduces ? total : blocks_[static_cast<std::size_t>(own_block_)].count;
    flags_.assign((static_cast<std::size_t>(size) + 63) / 64, 0);
    flag_bytes_ = flags_.size() * 8;
    flag_out_.resize(static_cast<std::size_t>(std::max(0, size - 1)));
  }
  set_layout({7, static_cast<uint64_t>(t), static_cast<uint64_t>(op), total, seg_elems_, static_cast<uint64_t>(size),
              steps_.size(), static_cast<uint64_t>(opts_.wire), opts_.check ? 1u : 0u,
              blocks_.empty() ? 0 : blocks_.back().count});
}

float* wire_ring_op::accumulator(std::size_t e0) {
  return dtype_ == dtype::f64 ? reinterpret_cast<float*>(acc64_.data()) + e0 : reinterpret_cast<float*>(own(e0));
}

void wire_ring_op::read_own(std::size_t n, bool nonfinite) {
  if (!opts_.check || own_left_ == 0) return;
  own_bad_ = own_bad_ || nonfinite;
  own_left_ -= std::min(n, own_left_);
  if (own_left_ == 0 && own_bad_) flags_[static_cast<std::size_t>(rank_) / 64] |= uint64_t{1} << (rank_ % 64);
}

void wire_ring_op::send_flags(transport& t) {
  if (!opts_.check || own_left_ > 0) return;
  // Flag frame k goes out once our own bit is known and k frames came in, so that frame k
  // carries the bits of k + 1 ranks; after size - 1 frames every rank has every bit.
  while (flags_sent_ + 1 < static_cast<std::size_t>(size_) && flags_sent_ <= flags_received_) {
    auto& out = flag_out_[flags_sent_];
    out = flags_;
    send_frame(t, static_cast<uint32_t>(steps_.size() + flags_sent_), 0, reinterpret_cast<const std::byte*>(out.data()),
         flag_bytes_);
    ++flags_sent_;
  }
}

void wire_ring_op::send_frame(transport& t, uint32_t step, uint64_t offset, const std::byte* payload,
                              std::size_t len) {
  send_left_ -= std::min<uint64_t>(len, send_left_);
  post(t, right_, step, offset, payload, len);
}

void wire_ring_op::send_range(transport& t, uint32_t step, const std::byte* from, std::size_t e0, std::size_t n) {
  for (std::size_t done = 0; done < n; done += seg_elems_) {
    const std::size_t m = std::min(seg_elems_, n - done);
    send_frame(t, step, (e0 + done) * unit_, from + (e0 + done) * unit_, m * unit_);
  }
}

const std::byte* wire_ring_op::finalise(std::size_t e0, std::size_t n, bool from_accumulator) {
  std::byte* w = gather_wire_.data() + e0 * 2;
  if (from_accumulator) {
    float* acc = accumulator(e0);
    if (divisor_ > 1) divide_by(acc, n, dtype::f32, divisor_);
    narrow_to_wire(w, opts_.wire, acc, dtype::f32, n, 1.0f);
  } else {
    read_own(n, narrow_to_wire(w, opts_.wire, own(e0), dtype_, n, opts_.prescale));
  }
  widen_from_wire(own(e0), dtype_, w, opts_.wire, n);
  return w;
}

void wire_ring_op::start(transport& t) {
  started_ = true;
  const bool reduces = steps_.empty() || steps_.front().reduce;
  if (!compressed()) {
    // Plain data: prescale first (one pass); the check scans the blocks nothing else reads
    // before they are sent: our own block of an allgather, the block a reduction sends first
    // (f32/f64 sum and average check the others inside their reduction, fused_check(); other
    // ops and dtypes scan every block here).
    const int first_sent = steps_.empty() ? -1 : steps_.front().send_block;
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      if (!reduces && static_cast<int>(i) != own_block_) continue;
      const auto& b = blocks_[i];
      if (opts_.prescale != 1.0f) scale_in_place(own(b.offset), b.count, dtype_, opts_.prescale);
      const bool later = reduces && fused_check() && static_cast<int>(i) != first_sent && size_ > 1;
      if (opts_.check && static_cast<int>(i) == first_sent && neighbour_checks_first()) {
        read_own(b.count, false);  // the right neighbour checks it as it arrives (step 0)
        continue;
      }
      if (opts_.check && !later) read_own(b.count, has_nonfinite(own(b.offset), dtype_, b.count));
    }
  }
  if (size_ == 1 || steps_.empty()) {
    if (compressed())
      for (auto& b : blocks_) finalise(b.offset, b.count, false);
    return;
  }
  for (auto& s : steps_) {
    recv_left_ += blocks_[static_cast<std::size_t>(s.recv_block)].count * unit_;
    send_left_ += blocks_[static_cast<std::size_t>(s.send_block)].count * unit_;
  }
  if (opts_.check) {
    recv_left_ += flag_out_.size() * flag_bytes_;
    send_left_ += flag_out_.size() * flag_bytes_;
  }
  const ring_step& first = steps_.front();
  const auto& b = blocks_[static_cast<std::size_t>(first.send_block)];
  if (!compressed()) {
    send_range(t, 0, base_, b.offset, b.count);
  } else {
    // Cast one segment, hand it to the transport, cast the next: the first frame leaves after
    // one segment's cast, not the whole block's, and the wire works while we cast the rest.
    std::byte* w = send_wire_.data();
    for (std::size_t done = 0; done < b.count; done += seg_elems_) {
      const std::size_t e0 = b.offset + done, m = std::min(seg_elems_, b.count - done);
      if (first.reduce) {
        read_own(m, narrow_to_wire(w + e0 * 2, opts_.wire, own(e0), dtype_, m, opts_.prescale));
        send_frame(t, 0, e0 * unit_, w + e0 * 2, m * unit_);
      } else {
        send_frame(t, 0, e0 * unit_, finalise(e0, m, false), m * unit_);  // allgather: our block is final
      }
    }
  }
  send_flags(t);
}

status wire_ring_op::check(int peer, const wire::frame_header& h) const {
  if (peer != left_) return bad_frame(peer, h, "expected frames from rank " + std::to_string(left_) + " only");
  if (h.step >= steps_.size()) {
    if (!opts_.check || h.step - steps_.size() >= flag_out_.size()) return bad_frame(peer, h, "no such step");
    if (h.offset != 0 || h.length != flag_bytes_)
      return bad_frame(peer, h, "expected a flag frame of " + std::to_string(flag_bytes_) + " bytes");
    return {};
  }
  const auto& b = blocks_[static_cast<std::size_t>(steps_[h.step].recv_block)];
  const uint64_t lo = b.offset * unit_, hi = (b.offset + b.count) * unit_, seg = seg_elems_ * unit_;
  if (!range_inside(h.offset, h.length, lo, hi) || (h.offset - lo) % seg != 0)
    return bad_frame(peer, h, "outside block [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
  const uint64_t want = std::min(seg, hi - h.offset);
  if (h.length != want) return bad_frame(peer, h, "expected " + std::to_string(want) + " bytes");
  return {};
}

std::byte* wire_ring_op::destination(int peer, const wire::frame_header& h) {
  if (!check(peer, h).ok() || h.step >= steps_.size() || steps_[h.step].reduce) return nullptr;
  return (compressed() ? gather_wire_.data() : base_) + h.offset;
}

status wire_ring_op::delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) {
  if (auto st = check(peer, h); !st.ok()) return st;
  recv_left_ -= h.length;
  if (h.step >= steps_.size()) {  // a flag frame
    for (std::size_t i = 0; i < flags_.size(); ++i) {
      uint64_t w;
      std::memcpy(&w, data + 8 * i, 8);
      flags_[i] |= w;
    }
    ++flags_received_;
    send_flags(t);
    return {};
  }
  const std::size_t e0 = h.offset / unit_, n = h.length / unit_;
  const bool last = h.step + 1 >= steps_.size();
  const uint32_t next = h.step + 1;
  if (!compressed()) {
    std::byte* mine = own(e0);
    if (h.step == 0 && neighbour_checks_first()) {
      // Step 0 brings the left neighbour's own input, unscaled: its bit is ours to set, from the
      // same pass that adds it.
      const uint32_t bad = add_checked_both(mine, data, dtype_, n);
      if (bad & 2u) flags_[static_cast<std::size_t>(left_) / 64] |= uint64_t{1} << (left_ % 64);
      read_own(n, (bad & 1u) != 0);
    } else if (steps_[h.step].reduce && opts_.check && fused_check()) {
      read_own(n, add_checked(mine, data, dtype_, n));
    } else if (steps_[h.step].reduce) {
      reduce_into(mine, data, n, dtype_, op_);
    } else if (data != mine) {
      std::memcpy(mine, data, h.length);
    }
    if (steps_[h.step].reduce) send_flags(t);
    if (!last) send_frame(t, next, h.offset, mine, h.length);
    return {};
  }
  if (steps_[h.step].reduce) {
    float* acc = accumulator(e0);
    read_own(n, accumulate_wire(acc, own(e0), dtype_, opts_.prescale, data, opts_.wire, n));
    if (!last && steps_[next].reduce) {
      std::byte* w = send_wire_.data() + e0 * 2;
      narrow_to_wire(w, opts_.wire, acc, dtype::f32, n, 1.0f);
      send_frame(t, next, h.offset, w, h.length);
    } else {
      const std::byte* w = finalise(e0, n, true);  // our block: every rank's part is in
      if (!last) send_frame(t, next, h.offset, w, h.length);
    }
    send_flags(t);
    return {};
  }
  std::byte* w = gather_wire_.data() + h.offset;
  if (data != w) std::memcpy(w, data, h.length);
  widen_from_wire(own(e0), dtype_, w, opts_.wire, n);
  if (!last) send_frame(t, next, h.offset, w, h.length);
  return {};
}

void wire_ring_op::finish() {
  if (!compressed() && divisor_ > 1) {
    const bool allreduce = !steps_.empty() && !steps_.back().reduce && steps_.front().reduce;
    for (std::size_t b = 0; b < blocks_.size(); ++b)
      if (allreduce || static_cast<int>(b) == own_block_ || size_ == 1)
        divide_by(own(blocks_[b].offset), blocks_[b].count, dtype_, divisor_);
  }
  if (opts_.check && opts_.report) opts_.report->merge(flags_);
}

std::unique_ptr<chunk_op> make_wire_ring_allreduce(uint64_t sequence, int stream, int rank, int size, void* data,
                                                   std::size_t count, dtype t, reduce_op op, std::size_t segment_bytes,
                                                   wire_options opts) {
  std::vector<elem_range> blocks(static_cast<std::size_t>(size));
  for (int b = 0; b < size; ++b) {
    const std::size_t lo = block_begin(count, size, b), hi = block_begin(count, size, b + 1);
    blocks[static_cast<std::size_t>(b)] = {lo, hi - lo};
  }
  const int divisor = op == reduce_op::average ? size : 1;
  return std::make_unique<wire_ring_op>(sequence, stream, rank, size, static_cast<std::byte*>(data), std::move(blocks),
                                        ring_allreduce_steps(rank, size), t, op, segment_bytes, divisor,
                                        (rank + 1) % size, std::move(opts));
}

std::unique_ptr<chunk_op> make_wire_ring_reducescatter(uint64_t sequence, int stream, int rank, int size, void* data,
                                                       const std::vector<byte_range>& slices, dtype t, reduce_op op,
                                                       std::size_t segment_bytes, wire_options opts) {
  // As make_ring_reducescatter: block b is the slice of rank b - 1, so rank r ends owning its own.
  const std::size_t e = size_of(t);
  std::vector<elem_range> blocks(static_cast<std::size_t>(size));
  for (int b = 0; b < size; ++b) {
    const auto& s = slices[static_cast<std::size_t>((b + size - 1) % size)];
    blocks[static_cast<std::size_t>(b)] = {s.offset / e, s.length / e};
  }
  const int divisor = op == reduce_op::average ? size : 1;
  return std::make_unique<wire_ring_op>(sequence, stream, rank, size, static_cast<std::byte*>(data), std::move(blocks),
                                        ring_reducescatter_steps(rank, size), t, op, segment_bytes, divisor,
                                        (rank + 1) % size, std::move(opts));
}

std::unique_ptr<chunk_op> make_wire_ring_allgather(uint64_t sequence, int stream, int rank, int size, void* out,
                                                   const std::vector<std::size_t>& counts, dtype t,
                                                   std::size_t segment_bytes, wire_options opts) {
  std::vector<elem_range> blocks(static_cast<std::size_t>(size));
  std::size_t at = 0;
  for (int b = 0; b < size; ++b) {
    blocks[static_cast<std::size_t>(b)] = {at, counts[static_cast<std::size_t>(b)]};
    at += counts[static_cast<std::size_t>(b)];
  }
  opts.prescale = 1.0f;  // nothing is summed
  return std::make_unique<wire_ring_op>(sequence, stream, rank, size, static_cast<std::byte*>(out), std::move(blocks),
                                        ring_allgather_steps(rank, size), t, reduce_op::sum, segment_bytes, 1, rank,
                                        std::move(opts));
}

}  // namespace chorus
