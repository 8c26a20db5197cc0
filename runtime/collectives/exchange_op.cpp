// Recursive-doubling allreduce and chain broadcast state machines.
#include "runtime/collectives/exchange_op.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/collectives/reduce.hpp"

namespace chorus {

exchange_op::exchange_op(uint64_t sequence, int stream, int rank, int size, void* data, std::size_t count, dtype t,
                         reduce_op op)
    : chunk_op(sequence, stream),
      size_(size),
      data_(static_cast<std::byte*>(data)),
      count_(count),
      bytes_(count * size_of(t)),
      dtype_(t),
      op_(op),
      steps_(recursive_doubling_steps(rank, size)) {
  set_layout({2, static_cast<uint64_t>(t), static_cast<uint64_t>(op), bytes_, static_cast<uint64_t>(size)});
  send_posted_.assign(steps_.size(), false);
  sendbuf_.resize(steps_.size());
  early_.resize(steps_.size());
  have_early_.assign(steps_.size(), false);
}

void exchange_op::start(transport& t) {
  started_ = true;
  if (size_ == 1 || bytes_ == 0) return;
  for (auto& s : steps_)
    if (s.recv_from >= 0) recv_left_ += bytes_;
  run(t);
}

void exchange_op::run(transport& t) {
  while (current_ < steps_.size()) {
    const auto& s = steps_[current_];
    if (s.send_to >= 0 && !send_posted_[current_]) {
      send_posted_[current_] = true;
      const std::byte* payload = data_;
      if (s.recv_from >= 0) {  // our buffer changes when the partner's data arrives: send a copy
        sendbuf_[current_].assign(data_, data_ + bytes_);
        payload = sendbuf_[current_].data();
      }
      post(t, s.send_to, static_cast<uint32_t>(current_), 0, payload, bytes_);
    }
    if (s.recv_from >= 0) {
      if (!have_early_[current_]) return;
      apply(current_, early_[current_].data());
      early_[current_] = {};
    }
    ++current_;
  }
}

void exchange_op::apply(std::size_t step, const std::byte* data) {
  if (steps_[step].reduce) reduce_into(data_, data, count_, dtype_, op_);
  else std::memcpy(data_, data, bytes_);
  recv_left_ -= bytes_;
}

std::byte* exchange_op::destination(int, const wire::frame_header&) { return nullptr; }

status exchange_op::delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) {
  if (h.step >= steps_.size() || steps_[h.step].recv_from != peer || h.offset != 0 || h.length != bytes_ ||
      have_early_[h.step] || h.step < current_)
    return bad_frame(peer, h, "not an expected recursive-doubling exchange of " + std::to_string(bytes_) + " bytes");
  if (h.step == current_ && send_posted_[current_]) {
    apply(current_, data);
    ++current_;
  } else {
    early_[h.step].assign(data, data + h.length);
    have_early_[h.step] = true;
  }
  run(t);
  return {};
}

bool exchange_op::needs(int peer) const {
  if (size_ == 1 || bytes_ == 0) return false;
  for (std::size_t k = current_; k < steps_.size(); ++k) {
    if (steps_[k].recv_from == peer) return true;
    if (steps_[k].send_to == peer && !send_posted_[k]) return true;
  }
  return false;
}

void exchange_op::finish() {
  if (op_ == reduce_op::average && size_ > 1) divide_by(data_, count_, dtype_, size_);
}

broadcast_op::broadcast_op(uint64_t sequence, int stream, int rank, int size, void* data, std::size_t bytes, int root,
                           std::size_t segment_bytes)
    : chunk_op(sequence, stream),
      size_(size),
      pos_((rank - root + size) % size),
      left_((rank + size - 1) % size),
      right_((rank + 1) % size),
      data_(static_cast<std::byte*>(data)),
      bytes_(bytes),
      segment_bytes_(std::max<std::size_t>(1, segment_bytes)) {
  set_layout({3, bytes, segment_bytes_, static_cast<uint64_t>(root), static_cast<uint64_t>(size)});
}

void broadcast_op::start(transport& t) {
  started_ = true;
  if (size_ == 1 || bytes_ == 0) return;
  if (pos_ != 0) {
    recv_left_ = bytes_;
    return;
  }
  for (std::size_t off = 0; off < bytes_; off += segment_bytes_)
    post(t, right_, 0, off, data_ + off, std::min(segment_bytes_, bytes_ - off));
}

status broadcast_op::check(int peer, const wire::frame_header& h) const {
  if (pos_ == 0 || peer != left_ || h.step != 0 || h.offset % segment_bytes_ != 0 || h.offset >= bytes_ ||
      h.length != std::min(segment_bytes_, bytes_ - h.offset))
    return bad_frame(peer, h, "not an expected broadcast segment of a " + std::to_string(bytes_) + "-byte buffer");
  return {};
}

std::byte* broadcast_op::destination(int peer, const wire::frame_header& h) {
  return check(peer, h).ok() ? data_ + h.offset : nullptr;
}

status broadcast_op::delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) {
  auto st = check(peer, h);
  if (!st.ok()) return st;
  if (data != data_ + h.offset) std::memcpy(data_ + h.offset, data, h.length);
  recv_left_ -= h.length;
  if (pos_ != size_ - 1) post(t, right_, 0, h.offset, data_ + h.offset, h.length);
  return {};
}

}  // namespace chorus
