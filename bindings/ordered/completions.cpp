// The completion thread: a queue of ends to run, pending calls' deadlines checked every tick.
#include "bindings/ordered/completions.hpp"

#include <algorithm>

#include "runtime/rendezvous/kv_client.hpp"

namespace chorus::ordered {

completions::completions(std::chrono::milliseconds timeout, std::function<void(const status&)> on_timeout)
    : timeout_(timeout),
      // Deadlines are checked every tick, not each by a wake-up of its own: a wake-up per call would
      // cost the small calls a context switch each.
      tick_(std::clamp<std::chrono::milliseconds>(timeout / 4, std::chrono::milliseconds(10),
                                                   std::chrono::milliseconds(1000))),
      on_timeout_(std::move(on_timeout)),
      thread_([this] { loop(); }) {}

completions::~completions() { stop(); }

void completions::begin(uint64_t seq, std::string name) {
  std::lock_guard lk(mu_);
  pending_.emplace(seq, std::make_pair(clock::now() + timeout_, std::move(name)));
}

void completions::end(uint64_t seq, std::function<void()> fn, bool after_earlier) {
  std::unique_lock lk(mu_);
  if (stopping_ && !thread_.joinable()) {
    pending_.erase(seq);
    lk.unlock();
    fn();
    return;
  }
  if (after_earlier && !pending_.empty() && pending_.begin()->first < seq) {
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

void completions::release_deferred() {
  const uint64_t oldest = pending_.empty() ? UINT64_MAX : pending_.begin()->first;
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
      auto oldest = std::min_element(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) {
        return a.second.first < b.second.first;
      });
      if (oldest->second.first <= clock::now()) {
        timed_out_ = true;
        const std::string what = oldest->second.second;
        lk.unlock();
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
