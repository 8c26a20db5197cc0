// Runners that run ends (more start while callbacks block), and a clock for deadlines and stalls.
#include "bindings/ordered/completions.hpp"

#include <algorithm>

#include "runtime/rendezvous/kv_client.hpp"

namespace chorus::ordered {

completions::completions(std::chrono::milliseconds timeout, std::function<std::string(uint64_t)> name,
                         std::function<void(const status&)> on_timeout, std::chrono::milliseconds stall_after,
                         std::function<void(uint64_t, const std::string&, uint64_t)> on_stall)
    : timeout_(timeout),
      stall_after_(stall_after),
      // Deadlines are checked every tick, not each by a wake-up of its own: a wake-up per call would
      // cost the small calls a context switch each.
      tick_(std::clamp<std::chrono::milliseconds>(std::min(timeout, stall_after) / 4, std::chrono::milliseconds(10),
                                                   std::chrono::milliseconds(1000))),
      name_(std::move(name)),
      on_timeout_(std::move(on_timeout)),
      on_stall_(std::move(on_stall)) {
  {
    std::lock_guard lk(mu_);
    start_runner();
  }
  clock_ = std::thread([this] { tick(); });
}

completions::~completions() { stop(); }

void completions::start_runner() {
  auto& r = runners_.emplace_back();
  r.thread = std::thread([this, &r] { run(r); });
}

int completions::runners() const {
  std::lock_guard lk(mu_);
  return static_cast<int>(runners_.size());
}

void completions::begin(uint64_t seq, uint64_t spec) {
  std::lock_guard lk(mu_);
  pending_.emplace(seq, pending_call{clock::now(), spec});
}

void completions::end(uint64_t seq, std::function<void()> fn, bool after_earlier) {
  std::unique_lock lk(mu_);
  if (stopped_) {
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
  help_if_stuck();
  work_cv_.notify_one();
}

void completions::ended_here(uint64_t seq) {
  std::lock_guard lk(mu_);
  pending_.erase(seq);
  if (!deferred_.empty()) {
    release_deferred();
    work_cv_.notify_one();
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

void completions::help_if_stuck() {
  if (ready_.empty() || stopping_ || static_cast<int>(runners_.size()) >= max_runners) return;
  const auto now = clock::now();
  for (const auto& r : runners_)
    if (!r.busy || now - r.since < stuck_after) return;  // one is free, or will be soon
  start_runner();
}

void completions::run(runner& me) {
  std::unique_lock lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stopping_ || !ready_.empty(); });
    if (ready_.empty()) return;  // stopping, and nothing left
    auto fn = std::move(ready_.front());
    ready_.pop_front();
    me.busy = true;
    me.since = clock::now();
    lk.unlock();
    fn();
    lk.lock();
    me.busy = false;
  }
}

void completions::tick() {
  std::unique_lock lk(mu_);
  for (;;) {
    clock_cv_.wait_for(lk, tick_, [&] { return stopping_; });
    if (stopping_) return;
    help_if_stuck();
    if (timed_out_ || pending_.empty()) continue;
    // Calls begin in number order, so the lowest number is the oldest.
    auto& [seq, oldest] = *pending_.begin();
    const auto waited = clock::now() - oldest.since;
    if (on_stall_ && stall_after_ < timeout_ && waited >= stall_after_ * (oldest.stall_reports + 1) &&
        waited < timeout_) {
      ++oldest.stall_reports;
      const uint64_t stalled = seq, spec = oldest.spec;
      lk.unlock();
      on_stall_(stalled, name_(stalled), spec);
      lk.lock();
    } else if (waited >= timeout_) {
      timed_out_ = true;
      const uint64_t late = seq;
      lk.unlock();
      on_timeout_(status{errc::timeout, name_(late) + " did not end within the group's timeout of " +
                                            kv::format_duration(timeout_) +
                                            " (init_process_group's timeout); the group is aborted"});
      lk.lock();
    }
  }
}

void completions::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    stopping_ = true;  // no runner starts from now on: runners_ no longer changes
    // Anything deferred runs now: the calls it waited for can no longer end here.
    for (auto& d : deferred_) ready_.push_back(std::move(d.fn));
    deferred_.clear();
    work_cv_.notify_all();
    clock_cv_.notify_all();
  }
  const auto self = std::this_thread::get_id();
  auto finish = [&](std::thread& t) {
    if (!t.joinable()) return;
    if (t.get_id() == self)
      t.detach();  // stopped from one of its own callbacks: that thread ends by itself
    else
      t.join();
  };
  finish(clock_);
  for (auto& r : runners_) finish(r.thread);  // runners drain the queue before they end
  std::deque<std::function<void()>> left;
  {
    std::lock_guard lk(mu_);
    stopped_ = true;
    left.swap(ready_);
  }
  for (auto& fn : left) fn();
}

}  // namespace chorus::ordered
