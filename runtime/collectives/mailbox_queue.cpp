// The pipeline's direct allreduces in hand-out order on a thread of their own (mailbox_queue.hpp).
#include "runtime/collectives/mailbox_queue.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace chorus {

mailbox_queue::mailbox_queue(std::unique_ptr<mailbox_allreduce> lane, callback on_protocol)
    : lane_(std::move(lane)), on_protocol_(std::move(on_protocol)), thread_([this] { loop(); }) {}

mailbox_queue::~mailbox_queue() { stop(status{errc::shutdown, "the communicator closed"}); }

void mailbox_queue::expect(uint64_t sequence) {
  std::lock_guard lk(mu_);
  order_.push_back(sequence);
}

void mailbox_queue::start(uint64_t sequence, void* data, std::size_t count, dtype t, reduce_op op, callback done) {
  start(sequence, {std::span{static_cast<std::byte*>(data), count * size_of(t)}}, t, op, std::move(done));
}

void mailbox_queue::start(uint64_t sequence, std::vector<std::span<std::byte>> regions, dtype t, reduce_op op,
                         callback done, nonfinite_report* check) {
  status refused;
  {
    std::lock_guard lk(mu_);
    if (stopping_) {
      refused = why_stopped_;
    } else if (std::find(order_.begin(), order_.end(), sequence) == order_.end() || started_.count(sequence)) {
      refused = status{errc::internal, "chunk " + std::to_string(sequence) +
                                           " started on the direct path without being handed out to it (or twice)"};
    } else {
      started_[sequence] = chunk{std::move(regions), t, op, std::move(done), check};
    }
  }
  if (!refused.ok()) {
    done(refused);
    return;
  }
  cv_.notify_one();
}

void mailbox_queue::forget_unstarted() {
  {
    std::lock_guard lk(mu_);
    std::erase_if(order_, [&](uint64_t s) { return started_.count(s) == 0; });
  }
  cv_.notify_one();
}

void mailbox_queue::stop(const status& why) {
  {
    std::lock_guard lk(mu_);
    if (!stopping_) {
      stopping_ = true;
      why_stopped_ = why;
    }
  }
  lane_->interrupt(why);
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

uint64_t mailbox_queue::ran() const {
  std::lock_guard lk(mu_);
  return ran_;
}

void mailbox_queue::loop() {
  // Chunks run but not yet told (done not called): see "Completions" in mailbox_queue.hpp.
  std::vector<std::pair<callback, status>> ended;
  std::chrono::steady_clock::time_point first_ended{};
  auto tell = [&] {
    for (auto& [done, st] : ended) done(st);
    ended.clear();
  };
  std::unique_lock lk(mu_);
  for (;;) {
    auto runnable = [&] { return stopping_ || (!order_.empty() && started_.count(order_.front())); };
    if (!ended.empty() && !runnable()) {
      lk.unlock();
      tell();
      lk.lock();
      continue;
    }
    cv_.wait(lk, runnable);
    if (stopping_) break;
    const uint64_t sequence = order_.front();
    order_.pop_front();
    auto node = started_.extract(sequence);
    chunk c = std::move(node.mapped());
    lk.unlock();
    if (!ended.empty()) {
      std::size_t bytes = 0;
      for (auto r : c.regions) bytes += r.size();
      if (bytes > completion_hold_bytes || std::chrono::steady_clock::now() - first_ended >= completion_delay) tell();
    }
    status st = lane_->run(c.regions, c.type, c.op, sequence, c.check);
    {
      std::lock_guard counted(mu_);
      ++ran_;
    }
    if (st.code() == errc::protocol && on_protocol_) on_protocol_(st);
    const auto now = std::chrono::steady_clock::now();
    if (ended.empty()) first_ended = now;
    const bool failed = !st.ok();
    ended.emplace_back(std::move(c.done), std::move(st));
    if (failed || now - first_ended >= completion_delay) tell();
    lk.lock();
  }
  // Stopped: what ran is told, what was started and not run ends with the reason (outside the lock).
  std::vector<chunk> left;
  for (auto& [seq, c] : started_) left.push_back(std::move(c));
  started_.clear();
  order_.clear();
  const status why = why_stopped_;
  lk.unlock();
  tell();
  for (auto& c : left) c.done(why);
}

}  // namespace chorus
