// The completion thread: a queue of ends to run, pending calls' deadlines checked every tick.
#include "bindings/ordered/completions.hpp"

#include <algorithm>

#include "runtime/rendezvous/kv_client.hpp"

namespace chorus::ordered {

completions::completions(std::chrono::milliseconds timeout, std::function<std::string(uint64_t)> name,
                         std::function<void(const status&)> on_timeout,
                         std::chrono::milliseconds stall_after,
                         std::function<void(uint64_t, const std::string&, uint64_t)> on_stall)
    : timeout_(timeout),
      stall_after_(stall_after),
      // Deadlines are checked every tick, not each by a wake-up of its own: a wake-up per call would
      // cost the small calls a context switch each.
      tick_(std::clamp<std::chrono::milliseconds>(std::min(timeout, stall_after) / 4, std::chrono::milliseconds(10),
                                                   std::chrono::milliseconds(1000))),
      name_(std::move(name)),
      on_timeout_(std::move(on_timeout)),
      on_stall_(std::move(on_stall)),
      thread_([this] { loop(); }) {}

completions::~completions() { stop(); }

void completions::begin(uint64_t seq, uint64_t spec) {
  std::lock_guard lk(mu_);
  pending_.emplace(seq, pending_call{clock::now(), spec});
}

void completions::end(uint64_t seq, std::function<void()> fn, bool after_earlier) {
  std::unique_lock lk(mu_);
  if (stopping_ && !thread_.joinable()) {
    pending_.erase(seq);
    lk.unlock();
    fn();
    return;
  }
  if (after_earlier && oldest_collective() < seq) {
    deferred_.push_back({seq, std::move(fn)});
  } else {
    ready_.push_back(std::move(fn));
  }
  pending_.erase(seq);
  release_deferred();
  cv_.notify_one();
}

void completions::ended_here(uint64_t seq) {
  std::lock_guard lk(mu_);
  pending_.erase(seq);
  if (!deferred_.empty()) {
    release_deferred();
    cv_.notify_one();
  }
}

uint64_t completions::oldest_collective() const {
  for (const auto& [seq, call] : pending_)
    if (call.spec != 0) return seq;
  return UINT64_MAX;
}

void completions::release_deferred() {
  const uint64_t oldest = oldest_collective();
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->seq < oldest) {  // nothing before it is pending any more (and it is not itself)
      ready_.push_back(std::move(it->fn));
      it = deferred_.erase(it);
    } else {
      ++it;
    }
  }
}

void completions::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait_for(lk, tick_, [&] { return stopping_ || !ready_.empty(); });
    while (!ready_.empty()) {
      auto fn = std::move(ready_.front());
      ready_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
    }
    if (stopping_) return;
    if (!timed_out_ && !pending_.empty()) {
      // Calls begin in number order, so the lowest number is the oldest.
      auto& [seq, oldest] = *pending_.begin();
      const auto waited = clock::now() - oldest.since;
      if (on_stall_ && stall_after_ < timeout_ && waited >= stall_after_ * (oldest.stall_reports + 1) &&
          waited < timeout_) {
        ++oldest.stall_reports;
        const uint64_t stalled = seq, spec = oldest.spec;
        lk.unlock();
        const std::string name = name_(stalled);
        on_stall_(stalled, name, spec);
        lk.lock();
        continue;
      }
      if (waited >= timeout_) {
        timed_out_ = true;
        const uint64_t late = seq;
        lk.unlock();
        const std::string what = name_(late);
        on_timeout_(status{errc::timeout, what + " did not end within the group's timeout of " +
                                              kv::format_duration(timeout_) +
                                              " (init_process_group's timeout); the group is aborted"});
        lk.lock();
      }
    }
  }
}

void completions::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  // Anything deferred runs now: the calls it waited for can no longer end here.
  std::deque<std::function<void()>> left;
  {
    std::lock_guard lk(mu_);
    for (auto& d : deferred_) ready_.push_back(std::move(d.fn));
    deferred_.clear();
    left.swap(ready_);
  }
  for (auto& fn : left) fn();
}

}  // namespace chorus::ordered
