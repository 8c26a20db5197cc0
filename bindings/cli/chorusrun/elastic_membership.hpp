// Who is in an elastic job (chorusrun --min-np/--max-np). The supervisor reports every worker's
// exit and calls tick() from its loop; the membership forms rounds in the store
// (elastic_coordinator.hpp) when workers die or ask, starts workers on the hosts and slots a
// discovery script adds and removes those of hosts and slots it drops (elastic_policy.hpp), and
// below --min-np waits up to --elastic-timeout for slots before it ends the job. A worker that
// fails blacklists its host (host_blacklist.hpp): its other workers there are stopped and no new
// one starts there; --reset-limit bounds the rounds. Processes stay the supervisor's.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/elastic_policy.hpp"
#include "bindings/cli/chorusrun/host_blacklist.hpp"
#include "bindings/cli/chorusrun/options.hpp"

namespace chorus::chorusrun {

class elastic_coordinator;

/// Timings of an elastic job (supervisor_config holds them; tests may shorten them).
struct elastic_timing {
  /// How long a worker's request for a new round waits, so that a death behind it is reaped
  /// first and left out of the new round.
  std::chrono::milliseconds settle{500};
  /// --host-discovery-script: how often it runs, and its time bound.
  std::chrono::milliseconds discovery_interval{1000};
  std::chrono::milliseconds discovery_bound{5000};
  /// A removed worker's time to leave by itself (at its next commit); then SIGTERM, and SIGKILL
  /// kill_grace after that.
  std::chrono::milliseconds leave_grace{10000};
  std::chrono::milliseconds kill_grace{3000};
  /// Horovod's cooldown jitter, uniform in [0, 1); unset: drawn from a random engine.
  std::function<double()> cooldown_jitter;
};

/// What the membership needs from the supervisor.
struct membership_hooks {
  std::function<void(const std::string&)> say;              ///< a "chorusrun: ..." line
  /// Starts worker `worker` at `at` (its place in the round it joins, of `world_size` workers,
  /// on host at.host); false: not started (said), and no worker is started on that host again.
  std::function<bool(int worker, const placement& at, int world_size)> start_worker;
  std::function<void(int worker, int signo)> signal_worker;  ///< signals one worker's process group
  /// The job ends with exit status 1. `told`: every worker was told to stop through the store
  /// (they get a grace period); false: the store failed, stop them now.
  std::function<void(bool told)> end_job;
};

/// Not thread-safe: the supervisor's loop calls it.
class elastic_membership {
 public:
  using clock = std::chrono::steady_clock;

  /// `workers`: those of round 0, which main formed, ascending by id. `opts` gives --min-np,
  /// --max-np, --host-discovery-script, --elastic-timeout (filled in by main), the blacklist's
  /// options and --reset-limit.
  elastic_membership(const launch_options& opts, const elastic_timing& timing, std::string host_name,
                     elastic_coordinator& store, std::vector<worker_at> workers, membership_hooks hooks);

  /// Worker `worker` ended (`wait_status` from waitpid, `how` in words). A removed worker's exit
  /// does not count, whatever its status. One that exited 0 marks the job as finishing: no worker
  /// is added or removed after it. Any other exit blacklists the worker's host (unless
  /// --no-blacklist): the other workers there are told to leave and get SIGTERM at once, as
  /// Horovod stops them. Then it is a change of the workers: a new round, a wait for slots, or
  /// the end of the job.
  void on_exit(int worker, int wait_status, const std::string& how);

  /// Does what is due: a round a worker asked for, a discovery run, a removed worker's deadline,
  /// the end of a wait for slots.
  void tick();

  /// When tick() has something to do next; at most 100 ms away (requests are polled).
  clock::time_point next_wakeup() const;

  /// True once the job ended (too few workers, or the store failed): nothing more happens here.
  bool ended() const { return ended_; }

 private:
  struct leaving {
    std::string why;                          // what the worker is told
    std::optional<clock::time_point> due;     // next signal, if any
    int signals_sent = 0;                     // 1: SIGTERM, 2: SIGKILL
  };

  void change(const std::string& cause);
  void form(const std::string& cause);
  void end(const std::string& what);
  void discover(clock::time_point now);
  void remove(const std::vector<int>& ids);
  int start(const std::vector<std::string>& hosts);
  void enforce_leave_deadlines(clock::time_point now);
  std::string blacklist_host(const std::string& host, std::vector<int>& stopping);
  void say_once(const std::string& message);
  std::string min_np_text() const;
  std::string blacklisted_text() const;

  int min_np_;
  int max_np_;
  std::optional<std::string> script_;
  double timeout_seconds_;
  elastic_timing timing_;
  std::string host_name_;
  elastic_coordinator& store_;
  membership_hooks hooks_;
  std::vector<worker_at> active_;       // in the newest round (or about to be), ascending by id
  std::map<int, leaving> leaving_;      // removed, not yet exited
  int next_id_;                         // id of the next worker started
  bool finishing_ = false;              // a worker exited 0
  bool ended_ = false;
  std::optional<clock::time_point> wait_until_;  // below --min-np, waiting for slots until then
  clock::time_point next_discovery_{};
  std::set<std::string> said_;          // messages said once
  std::set<std::string> refused_;       // hosts where a worker could not be started
  bool blacklisting_;                   // false with --no-blacklist
  host_blacklist blacklist_;
  std::optional<int> reset_limit_;
};

}  // namespace chorus::chorusrun
