// The threads that end a group's calls (ordered_group.hpp). The data plane reports on its own
// threads (the I/O thread, the one-host lane); what a framework does when a call ends (a torch
// future's callbacks: DDP divides and copies a bucket there) must not run on them, so every end
// is handed to a runner thread here. A callback may itself start a call and wait for it (DDP's
// PowerSGD hook does): while every runner has been inside a callback for a while and ends wait,
// another runner starts (at most max_runners), so such a wait never waits for itself.
// A clock thread keeps the pending calls' deadlines: a call pending for a while is reported as
// stalled (the group then asks its members where they are, to tell a mismatch from a slow
// member), one pending past the group's timeout is reported once (the group then aborts). An end
// that must follow every earlier collective (a barrier's) is held back until they ended.
// Thread-safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
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
  /// Runners there may be at most (one runs ends; more start only while callbacks block).
  static constexpr int max_runners = 8;
  /// How long every runner must have been inside a callback, with ends waiting, before another
  /// starts.
  static constexpr std::chrono::milliseconds stuck_after{20};

  /// `on_timeout` runs on the clock thread, once, for the first call pending past `timeout`, with
  /// a status naming it (errc::timeout; `name(seq)` gives the text). `on_stall(seq, name, spec)`
  /// runs on the clock thread for the oldest pending call each time it has been pending another
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
  /// Call `seq` ended: `fn` runs on a runner (after every collective call before `seq` ended,
  /// when `after_earlier`: calls begun with a spec; point-to-point ones have none), and the call
  /// is no longer pending.
  void end(uint64_t seq, std::function<void()> fn, bool after_earlier = false);
  /// Call `seq` ended on the calling thread, which reports it itself.
  void ended_here(uint64_t seq);
  /// Runs what is queued, then joins the threads. Later end()s run their function on the caller.
  /// Idempotent.
  void stop();
  /// Runner threads started so far (tests).
  int runners() const;

 private:
  struct pending_call {
    clock::time_point since;
    uint64_t spec = 0;
    int stall_reports = 0;
  };
  struct deferred {
    uint64_t seq;
    std::function<void()> fn;
  };
  struct runner {
    std::thread thread;
    bool busy = false;
    clock::time_point since;  // of the callback it runs (with busy)
  };
  void run(runner& me);
  void tick();
  /// Starts another runner when ends wait and every runner is stuck in a callback (mu_ held).
  void help_if_stuck();
  void start_runner();  // mu_ held
  /// Moves deferred functions whose earlier calls all ended to the run queue (mu_ held).
  void release_deferred();
  /// The number of the oldest pending call with a spec; UINT64_MAX when none (mu_ held).
  uint64_t oldest_collective() const;

  std::chrono::milliseconds timeout_, stall_after_, tick_;
  std::function<std::string(uint64_t)> name_;
  std::function<void(const status&)> on_timeout_;
  std::function<void(uint64_t, const std::string&, uint64_t)> on_stall_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, clock_cv_;
  std::map<uint64_t, pending_call> pending_;
  std::vector<deferred> deferred_;
  std::deque<std::function<void()>> ready_;
  std::list<runner> runners_;  // stable addresses
  bool timed_out_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread clock_;  // last: starts after the members it uses
};

}  // namespace chorus::ordered
