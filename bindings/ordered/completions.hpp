// The thread that ends a group's calls (ordered_group.hpp). The data plane reports on its own
// threads (the I/O thread, the one-host lane); what a framework does when a call ends (a
// torch future's callbacks: DDP divides and copies a bucket there) must not run on them, so
// every end is handed to this thread. It also keeps the pending calls' deadlines: a call pending
// for a while is reported as stalled (the group then asks its members where they are, to tell a
// mismatch from a slow member), one pending past the group's timeout is reported once (the group
// then aborts), and it holds back an end that must follow every earlier call (a barrier's).
// Thread-safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus::ordered {

class completions {
 public:
  using clock = std::chrono::steady_clock;
  /// `on_timeout` runs on this thread, once, for the first call pending past `timeout`, with a
  /// status naming it (errc::timeout; `name(seq)` gives the text). `on_stall(seq, name, spec)` runs
  /// on this thread for the oldest pending call each time it has been pending another
  /// `stall_after`.
  completions(std::chrono::milliseconds timeout, std::function<std::string(uint64_t seq)> name,
              std::function<void(const status&)> on_timeout,
              std::chrono::milliseconds stall_after = std::chrono::milliseconds::max(),
              std::function<void(uint64_t seq, const std::string& name, uint64_t spec)> on_stall = {});
  /// stop().
  ~completions();
  completions(const completions&) = delete;
  completions& operator=(const completions&) = delete;

  /// Call `seq` (numbers grow in call order) is pending; `spec` (the call's digest; 0 for
  /// point-to-point calls) goes to on_stall.
  void begin(uint64_t seq, uint64_t spec = 0);
  /// Call `seq` ended: `fn` runs on this thread (after every collective call before `seq`
  /// ended, when `after_earlier`: calls begun with a spec; point-to-point ones have none), and
  /// the call is no longer pending.
  void end(uint64_t seq, std::function<void()> fn, bool after_earlier = false);
  /// Call `seq` ended on the calling thread, which reports it itself.
  void ended_here(uint64_t seq);
  /// Runs what is queued, then joins the thread. Later end()s run their function on the caller.
  /// Idempotent.
  void stop();

 private:
  struct deferred {
    uint64_t seq;
    std::function<void()> fn;
  };
  void loop();
  /// Moves deferred functions whose earlier calls all ended to the run queue (mu_ held).
  void release_deferred();
  /// The number of the oldest pending call with a spec; UINT64_MAX when none (mu_ held).
  uint64_t oldest_collective() const;

  struct pending_call {
    clock::time_point since;
    uint64_t spec = 0;
    int stall_reports = 0;
  };
  std::chrono::milliseconds timeout_, stall_after_, tick_;
  std::function<std::string(uint64_t)> name_;
  std::function<void(const status&)> on_timeout_;
  std::function<void(uint64_t, const std::string&, uint64_t)> on_stall_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, pending_call> pending_;
  std::vector<deferred> deferred_;
  std::deque<std::function<void()>> ready_;
  bool timed_out_ = false;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace chorus::ordered
