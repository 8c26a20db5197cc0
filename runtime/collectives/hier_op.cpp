// The hierarchical allreduce state machine: phases, held frames, segment forwarding.
#include "runtime/collectives/hier_op.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/collectives/reduce.hpp"

namespace chorus {

hier_op::hier_op(uint64_t sequence, int stream, const host_groups& g, int rank, void* data, std::size_t count,
                 dtype t, reduce_op op, std::size_t segment_bytes, allreduce_choice variant)
    : chunk_op(sequence, stream),
      base_(static_cast<std::byte*>(data)),
      total_bytes_(count * size_of(t)),
      dtype_(t),
      op_(op),
      divisor_(op == reduce_op::average ? static_cast<int>(g.host_of.size()) : 1) {
  const std::size_t e = size_of(t);
  segment_bytes_ = std::max(e, segment_bytes / e * e);
  steps_ = variant == allreduce_choice::hier_leader ? hier_leader_steps(g, rank, count, e)
                                                    : hier_sharded_steps(g, rank, count, e);
  step_left_.resize(steps_.size());
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const auto& s = steps_[i];
    if (s.recv.peer >= 0) {
      by_wire_[s.recv.wire] = i;
      step_left_[i] = s.recv.length;
      phase_left_[s.phase] += s.recv.length;
      peers_[s.recv.peer].recv += s.recv.length;
    }
    if (s.send.peer >= 0) peers_[s.send.peer].send += s.send.length;
  }
  // Identical on every rank: the variant, the data, and the shape of the groups.
  uint64_t shape = 0;
  for (const auto& h : g.hosts) shape = shape * 131 + h.size();
  set_layout({variant == allreduce_choice::hier_leader ? 21u : 20u, static_cast<uint64_t>(t),
              static_cast<uint64_t>(op), total_bytes_, segment_bytes_, g.host_of.size(), shape});
}

void hier_op::start(transport& t) {
  started_ = true;
  for (auto left : phase_left_) recv_left_ += left;
  open_phase(t);
  advance(t);
}

void hier_op::send_range(transport& t, const hier_transfer& to, std::size_t offset, std::size_t length) {
  for (std::size_t done = 0; done < length; done += segment_bytes_) {
    std::size_t n = std::min(segment_bytes_, length - done);
    post(t, to.peer, to.wire, offset + done, base_ + offset + done, n);
  }
  peers_[to.peer].send -= length;
}

void hier_op::open_phase(transport& t) {
  for (const auto& s : steps_)
    if (s.phase == phase_ && s.send.peer >= 0 && !s.forward) send_range(t, s.send, s.send.offset, s.send.length);
  std::vector<held> now, later;
  for (auto& f : held_) (steps_[f.step].phase == phase_ ? now : later).push_back(std::move(f));
  held_ = std::move(later);
  for (auto& f : now) consume(t, f.step, f.header, f.payload.data());
}

void hier_op::advance(transport& t) {
  while (phase_ < 3 && phase_left_[phase_] == 0) {
    ++phase_;
    if (phase_ < 3) open_phase(t);
  }
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
  return s.phase <= phase_ && !s.reduce ? base_ + h.offset : nullptr;
}

status hier_op::delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) {
  auto m = match(peer, h);
  if (!m) return m.error();
  if (h.length > step_left_[*m]) return bad_frame(peer, h, "more bytes than the step expects");
  if (steps_[*m].phase > phase_) {
    // Our data is not final for that phase yet: keep a copy until it opens. The step's count
    // goes down now, so that a duplicate is refused at once.
    step_left_[*m] -= h.length;
    held_.push_back(held{*m, h, std::vector<std::byte>(data, data + h.length)});
    return {};
  }
  step_left_[*m] -= h.length;
  consume(t, *m, h, data);
  advance(t);
  return {};
}

void hier_op::consume(transport& t, std::size_t step, const wire::frame_header& h, const std::byte* data) {
  const auto& s = steps_[step];
  std::byte* mine = base_ + h.offset;
  if (s.reduce) reduce_into(mine, data, h.length / size_of(dtype_), dtype_, op_);
  else if (data != mine && h.length) std::memcpy(mine, data, h.length);
  phase_left_[s.phase] -= h.length;
  peers_[s.recv.peer].recv -= h.length;
  recv_left_ -= h.length;
  if (step + 1 < steps_.size() && steps_[step + 1].forward) send_range(t, steps_[step + 1].send, h.offset, h.length);
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

}  // namespace chorus
