// The hierarchical allreduce and allgather state machine: segments gated by phase (hier_readiness),
// held frames, waiting sends, segment forwarding.
#include "runtime/collectives/hier_op.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/collectives/hier_allgather.hpp"
#include "runtime/collectives/reduce.hpp"

namespace chorus {

namespace {
// The shape of the groups, for layout tags: identical on every rank.
uint64_t shape_of(const host_groups& g) {
  uint64_t shape = 0;
  for (const auto& h : g.hosts) shape = shape * 131 + h.size();
  return shape;
}
}  // namespace

hier_op::hier_op(uint64_t sequence, int stream, const host_groups& g, int rank, void* data, std::size_t count,
                 dtype t, reduce_op op, std::size_t segment_bytes, allreduce_choice variant)
    : hier_op(sequence, stream,
              variant == allreduce_choice::hier_leader ? hier_leader_steps(g, rank, count, size_of(t))
                                                       : hier_sharded_steps(g, rank, count, size_of(t)),
              data, count * size_of(t), t, op, segment_bytes,
              op == reduce_op::average ? static_cast<int>(g.host_of.size()) : 1,
              variant == allreduce_choice::hier_leader ? 21u : 20u, shape_of(g) * 8191 + g.host_of.size()) {}

hier_op::hier_op(uint64_t sequence, int stream, std::vector<hier_step> steps, void* data, std::size_t total_bytes,
                 dtype t, reduce_op op, std::size_t segment_bytes, int divisor, uint64_t layout, uint64_t shape)
    : chunk_op(sequence, stream),
      base_(static_cast<std::byte*>(data)),
      total_bytes_(total_bytes),
      steps_(std::move(steps)),
      gate_(steps_),
      dtype_(t),
      op_(op),
      divisor_(divisor) {
  const std::size_t e = size_of(t);
  segment_bytes_ = std::max(e, segment_bytes / e * e);
  step_left_.resize(steps_.size());
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const auto& s = steps_[i];
    if (s.recv.peer >= 0) {
      by_wire_[s.recv.wire] = i;
      step_left_[i] = s.recv.length;
      recv_left_ += s.recv.length;
      peers_[s.recv.peer].recv += s.recv.length;
    }
    if (s.send.peer >= 0) peers_[s.send.peer].send += s.send.length;
    if (s.send.peer >= 0 && !s.forward)
      for (std::size_t done = 0; done < s.send.length; done += segment_bytes_)
        waiting_.push_back({i, s.send.offset + done, std::min(segment_bytes_, s.send.length - done)});
  }
  // Identical on every rank: the step-list builder, the data, and the shape of the groups.
  set_layout({layout, static_cast<uint64_t>(t), static_cast<uint64_t>(op), total_bytes_, segment_bytes_, shape});
}

void hier_op::start(transport& t) {
  started_ = true;
  // Nothing is held before the start, so this only posts the sends whose bytes are ready (the
  // first phase's) and cannot fail.
  (void)flush(t);
}

void hier_op::send_range(transport& t, const hier_transfer& to, std::size_t offset, std::size_t length) {
  for (std::size_t done = 0; done < length; done += segment_bytes_) {
    std::size_t n = std::min(segment_bytes_, length - done);
    post(t, to.peer, to.wire, offset + done, base_ + offset + done, n);
  }
  peers_[to.peer].send -= length;
}

status hier_op::flush(transport& t) {
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t k = 0; k < waiting_.size();) {
      const auto w = waiting_[k];
      const auto& s = steps_[w.step];
      if (!gate_.ready(s.phase, w.offset, w.length)) {
        ++k;
        continue;
      }
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(k));
      send_range(t, s.send, w.offset, w.length);
    }
    for (std::size_t k = 0; k < held_.size();) {
      const auto& f = held_[k];
      if (!gate_.ready(steps_[f.step].phase, f.header.offset, f.header.length)) {
        ++k;
        continue;
      }
      held now = std::move(held_[k]);
      held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(k));
      if (auto st = consume(t, now.step, now.header, now.payload.data()); !st.ok()) return st;
      moved = true;  // its bytes may have made others ready
    }
  }
  return {};
}

result<std::size_t> hier_op::match(int peer, const wire::frame_header& h) const {
  auto it = by_wire_.find(static_cast<uint16_t>(h.step));
  if (h.step > 0xffff || it == by_wire_.end()) return bad_frame(peer, h, "no such hierarchical step here");
  const auto& s = steps_[it->second];
  if (peer != s.recv.peer)
    return bad_frame(peer, h, "expected that step from rank " + std::to_string(s.recv.peer));
  const auto& r = s.recv;
  if (!range_inside(h.offset, h.length, r.offset, r.offset + r.length) || (h.offset - r.offset) % segment_bytes_ != 0)
    return bad_frame(peer, h, "outside [" + std::to_string(r.offset) + ", " + std::to_string(r.offset + r.length) + ")");
  std::size_t want = std::min(segment_bytes_, r.offset + r.length - h.offset);
  if (h.length != want) return bad_frame(peer, h, "expected " + std::to_string(want) + " bytes");
  return it->second;
}

std::byte* hier_op::destination(int peer, const wire::frame_header& h) {
  auto m = match(peer, h);
  if (!m) return nullptr;
  const auto& s = steps_[*m];
  return !s.reduce && gate_.ready(s.phase, h.offset, h.length) ? base_ + h.offset : nullptr;
}

status hier_op::delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) {
  auto m = match(peer, h);
  if (!m) return m.error();
  if (h.length > step_left_[*m]) return bad_frame(peer, h, "more bytes than the step expects");
  // The step's count goes down now, also for a frame kept aside, so that a duplicate is refused at once.
  step_left_[*m] -= h.length;
  if (!gate_.ready(steps_[*m].phase, h.offset, h.length)) {
    // Our bytes there are not final for that phase yet: keep a copy until they are.
    held_.push_back(held{*m, h, std::vector<std::byte>(data, data + h.length)});
    return {};
  }
  if (auto st = consume(t, *m, h, data); !st.ok()) return st;
  return flush(t);
}

status hier_op::consume(transport& t, std::size_t step, const wire::frame_header& h, const std::byte* data) {
  const auto& s = steps_[step];
  std::byte* mine = base_ + h.offset;
  if (s.reduce) reduce_into(mine, data, h.length / size_of(dtype_), dtype_, op_);
  else if (data != mine && h.length) std::memcpy(mine, data, h.length);
  if (!gate_.received(s.phase, h.offset, h.length))
    return status{errc::internal, "hierarchical chunk " + std::to_string(sequence()) + ": bytes [" +
                                      std::to_string(h.offset) + ", " + std::to_string(h.offset + h.length) +
                                      ") of phase " + std::to_string(s.phase) + " received more often than planned"};
  peers_[s.recv.peer].recv -= h.length;
  recv_left_ -= h.length;
  if (step + 1 < steps_.size() && steps_[step + 1].forward) send_range(t, steps_[step + 1].send, h.offset, h.length);
  return {};
}

void hier_op::finish() {
  if (divisor_ > 1) divide_by(base_, total_bytes_ / size_of(dtype_), dtype_, divisor_);
}

bool hier_op::needs(int peer) const {
  if (started_ && recv_left_ == 0) return false;
  auto it = peers_.find(peer);
  return it != peers_.end() && (it->second.recv > 0 || it->second.send > 0);
}

std::unique_ptr<chunk_op> make_hier_allreduce(uint64_t sequence, int stream, const host_groups& g, int rank,
                                              void* data, std::size_t count, dtype t, reduce_op op,
                                              std::size_t segment_bytes, allreduce_choice variant) {
  return std::make_unique<hier_op>(sequence, stream, g, rank, data, count, t, op, segment_bytes, variant);
}

std::unique_ptr<chunk_op> make_hier_allgather(uint64_t sequence, int stream, const host_groups& g, int rank, void* out,
                                              const std::vector<hier_block>& blocks, dtype t,
                                              std::size_t segment_bytes) {
  std::size_t total = 0;
  uint64_t shape = shape_of(g);
  for (const auto& b : blocks) {
    total = std::max(total, b.offset + b.length);
    shape = shape * 1000003 + b.length;
  }
  return std::make_unique<hier_op>(sequence, stream, hier_allgather_steps(g, rank, blocks), out, total, t,
                                   reduce_op::sum, segment_bytes, 1, 22, shape);
}

}  // namespace chorus
