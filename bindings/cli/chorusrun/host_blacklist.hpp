// The hosts an elastic job keeps its workers off (horovodrun's blacklist, horovod 0.28's
// runner/elastic/discovery.py): a worker that fails blacklists its host; no new worker is placed
// there. With --blacklist-cooldown-range MIN MAX the host comes back once a cooldown ends, which
// grows with each failure as Horovod computes it; without it the host stays out for the job's
// life. Pure: no clock reads (the caller passes the time) and no randomness of its own (the
// caller passes Horovod's jitter, uniform in [0, 1)). The membership (elastic_membership.hpp)
// owns one; tests/bindings/cli/host_blacklist_test.cpp holds it to these rules.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/host_list.hpp"

namespace chorus::chorusrun {

/// --blacklist-cooldown-range MIN MAX, in whole seconds as horovodrun takes them.
struct cooldown_range {
  int min_s = 0;
  int max_s = 0;
  bool operator==(const cooldown_range&) const = default;
};

/// Horovod's bounds for the range: MIN at least 1 s, MAX at most an hour.
inline constexpr int cooldown_lowest_s = 1;
inline constexpr int cooldown_highest_s = 3600;

/// The cooldown that the `failures`-th blacklisting of a host starts (failures >= 1), as
/// Horovod's HostState computes it: MIN * 2^failures + jitter * MIN, kept within [MIN, MAX].
/// The first failure thus waits 2-3 MIN (not MIN), and from some failure on always MAX.
std::chrono::duration<double> cooldown_after(int failures, const cooldown_range& range, double jitter);

/// Not thread-safe: the supervisor's loop uses it.
class host_blacklist {
 public:
  using clock = std::chrono::steady_clock;

  /// `cooldown`: nullopt, a blacklisted host never comes back. `jitter`: a draw uniform in [0, 1)
  /// for each cooldown started.
  host_blacklist(std::optional<cooldown_range> cooldown, std::function<double()> jitter);

  /// A worker on `host` failed at `now`: the host is blacklisted. With a cooldown range, its
  /// failure count grows and a cooldown starts, unless one still runs (Horovod: a second failure
  /// inside the cooldown neither lengthens it nor counts). Returns the end of the cooldown;
  /// nullopt without a range.
  std::optional<clock::time_point> add(const std::string& host, clock::time_point now);

  /// True while `host` may get no new worker: blacklisted, and its cooldown (if any) not over.
  bool blocked(const std::string& host, clock::time_point now) const;

  /// Hosts whose cooldown is over by `now` leave the blacklist and are returned (in name order);
  /// their failure count stays, so their next cooldown is longer. Horovod does this when a
  /// discovery run offers the host; the membership calls it before each run.
  std::vector<std::string> readmit(clock::time_point now);

  /// `offered` without the hosts blocked at `now` (the script's order kept).
  std::vector<host_slots> without_blocked(std::vector<host_slots> offered, clock::time_point now) const;

  /// The hosts blocked at `now`, in name order.
  std::vector<std::string> blocked_hosts(clock::time_point now) const;

  /// How often `host` was blacklisted with a cooldown started (0 without a range).
  int failures(const std::string& host) const;

 private:
  struct state {
    bool blacklisted = false;
    int failures = 0;
    std::optional<clock::time_point> cooldown_end;  // with a range: when it may come back
  };

  std::optional<cooldown_range> cooldown_;
  std::function<double()> jitter_;
  std::map<std::string, state> hosts_;
};

}  // namespace chorus::chorusrun
