// The membership of an elastic job, step by step (elastic_membership.hpp):
//  1. A worker exits: removed ones are forgotten; exit 0 marks the job as finishing; anything
//     else blacklists its host (unless --no-blacklist: Horovod's HostManager.blacklist), whose
//     other workers are told to leave and get SIGTERM at once (Horovod's host event), and is a
//     change (2).
//  2. A change: at least --min-np workers left, a new round of them; fewer, with a discovery
//     script, a wait of up to --elastic-timeout for slots (the workers wait in init()); else,
//     or when the wait runs out, every worker is told to stop and the job ends with status 1.
//     Every round after the first counts against --reset-limit: past it, the job ends instead.
//  3. Discovery (every interval): free slots on any offered host, new workers there (through
//     the supervisor: directly or through the launcher) and a round with them; workers of a
//     host no longer offered, or beyond its slots, are told to leave (a "leave" assignment in
//     the new round: they end at their next commit, with SIGTERM after leave_grace), never
//     below --min-np. Blacklisted hosts are left out of the offer until their cooldown ends.
#include "bindings/cli/chorusrun/elastic_membership.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "bindings/cli/chorusrun/elastic_coordinator.hpp"
#include "bindings/cli/chorusrun/elastic_policy.hpp"
#include "bindings/cli/chorusrun/host_discovery.hpp"
#include "runtime/config/variables.hpp"
#include "runtime/core/log.hpp"

namespace chorus::chorusrun {
namespace {

std::vector<int> ids_of(const std::vector<worker_at>& workers) {
  std::vector<int> ids;
  for (const auto& w : workers) ids.push_back(w.id);
  return ids;
}

std::string ids_text(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

std::string ranks_left(size_t n) { return std::to_string(n) + " rank(s) left"; }

std::string names_text(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Horovod draws its cooldown jitter from Python's random.uniform(0, 1).
std::function<double()> random_jitter() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
}

}  // namespace

elastic_membership::elastic_membership(const launch_options& opts, const elastic_timing& timing,
                                       std::string host_name, elastic_coordinator& store,
                                       std::vector<worker_at> workers, membership_hooks hooks)
    : min_np_(opts.min_np.value_or(opts.num_ranks)),
      max_np_(opts.max_np.value_or(opts.num_ranks)),
      script_(opts.discovery_script),
      timeout_seconds_(opts.elastic_timeout_seconds.value_or(600)),
      timing_(timing),
      host_name_(std::move(host_name)),
      store_(store),
      hooks_(std::move(hooks)),
      active_(std::move(workers)),
      next_id_(active_.empty() ? 0 : active_.back().id + 1),
      blacklisting_(opts.blacklist),
      blacklist_(opts.blacklist_cooldown, timing.cooldown_jitter ? timing.cooldown_jitter : random_jitter()),
      reset_limit_(opts.reset_limit) {}

// Step 1.
void elastic_membership::on_exit(int worker, int wait_status, const std::string& how) {
  if (ended_) return;
  if (leaving_.erase(worker) > 0) {
    CHORUS_LOG(info, "chorusrun", "removed worker ended worker=" << worker << " how=\"" << how << "\"");
    return;
  }
  auto it = std::find_if(active_.begin(), active_.end(), [&](const worker_at& w) { return w.id == worker; });
  if (it == active_.end()) return;
  const std::string host = it->host;
  active_.erase(it);
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
    finishing_ = true;
    return;
  }
  std::vector<int> stopping;
  std::string cause = "rank " + std::to_string(worker) + " " + how;
  if (blacklisting_) cause += blacklist_host(host, stopping);
  change(cause);
  // Signalled only when the job goes on: a job that ends tells them why through the store.
  if (ended_) return;
  const auto now = clock::now();
  for (int id : stopping) {
    hooks_.signal_worker(id, SIGTERM);
    leaving_[id].due = now + timing_.kill_grace;
    leaving_[id].signals_sent = 1;
  }
}

void elastic_membership::tick() {
  if (ended_) return;
  const auto now = clock::now();
  enforce_leave_deadlines(now);
  if (wait_until_ && now >= *wait_until_) {
    end(ranks_left(active_.size()) + ", fewer than " + min_np_text() +
        ", and --host-discovery-script offered no slots for more within --elastic-timeout " +
        cfg::number_text(timeout_seconds_) + " s" + blacklisted_text() + ": ending the job");
    return;
  }
  // While waiting for slots the workers' requests are what the wait serves.
  if (!wait_until_ && store_.wants_new_round(timing_.settle)) change("a rank asked for a new round");
  if (!ended_ && script_ && !finishing_ && now >= next_discovery_) discover(now);
}

elastic_membership::clock::time_point elastic_membership::next_wakeup() const {
  auto next = clock::now() + std::chrono::milliseconds(100);
  if (ended_) return next;
  if (script_ && !finishing_) next = std::min(next, next_discovery_);
  if (wait_until_) next = std::min(next, *wait_until_);
  for (const auto& [id, l] : leaving_)
    if (l.due) next = std::min(next, *l.due);
  return next;
}

// Step 2.
void elastic_membership::change(const std::string& cause) {
  const auto now = clock::now();
  const bool can_wait = script_ && !finishing_ && !active_.empty();
  const bool waited_out = wait_until_ && now >= *wait_until_;
  switch (decide_after_change(static_cast<int>(active_.size()), min_np_, can_wait, waited_out)) {
    case after_change::form_round:
      form(cause);
      return;
    case after_change::wait_for_slots:
      if (wait_until_) {
        hooks_.say(cause + "; " + ranks_left(active_.size()) + ", still waiting for slots");
        return;
      }
      wait_until_ = now + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_seconds_));
      next_discovery_ = now;  // look for slots at once
      hooks_.say(cause + "; " + ranks_left(active_.size()) + ", fewer than " + min_np_text() +
                 ": waiting up to --elastic-timeout " + cfg::number_text(timeout_seconds_) +
                 " s for --host-discovery-script to offer slots" + blacklisted_text());
      return;
    case after_change::end_job:
      end(cause + "; " + ranks_left(active_.size()) + ", fewer than " + min_np_text() +
          (active_.empty() && !blacklist_.blocked_hosts(now).empty()
               ? " and none on a host that is not blacklisted"
               : "") +
          ": ending the job");
      return;
  }
}

void elastic_membership::form(const std::string& cause) {
  if (reset_limit_reached(store_.round(), reset_limit_)) {
    end(cause + "; the job was already reset " + std::to_string(store_.round()) + " time(s), all --reset-limit " +
        std::to_string(*reset_limit_) + " allows: ending the job");
    return;
  }
  std::vector<elastic_coordinator::leaving_worker> told;
  for (const auto& [id, l] : leaving_) told.push_back({id, l.why});
  if (auto st = store_.form_round(active_, told); !st) {
    ended_ = true;
    hooks_.say("cannot form a new round: " + st.message() + "; stopping the job");
    hooks_.end_job(false);
    return;
  }
  wait_until_.reset();
  hooks_.say(cause + "; elastic round " + std::to_string(store_.round()) + " goes on with " +
             std::to_string(active_.size()) + " rank(s)");
}

void elastic_membership::end(const std::string& what) {
  ended_ = true;
  hooks_.say(what);
  std::vector<int> everyone = ids_of(active_);
  for (const auto& [id, l] : leaving_) everyone.push_back(id);
  if (auto st = store_.end_job(everyone, "chorusrun: " + what); !st) {
    hooks_.say("cannot tell the ranks to stop: " + st.message() + "; stopping them");
    hooks_.end_job(false);
    return;
  }
  hooks_.end_job(true);
}

// Step 3.
void elastic_membership::discover(clock::time_point now) {
  next_discovery_ = now + timing_.discovery_interval;
  for (const auto& host : blacklist_.readmit(now))
    hooks_.say("host " + host + "'s blacklist cooldown is over: workers may start there again");
  auto offered = offered_hosts(*script_, host_name_, timing_.discovery_bound,
                               [this](const std::string& m) { say_once(m); });
  if (!offered) return;
  offered = blacklist_.without_blocked(std::move(*offered), now);
  // A host that refused a worker gets no more: its slots shrink to the workers it runs.
  for (auto& h : *offered) {
    if (refused_.count(h.host) == 0) continue;
    h.slots = std::min<int>(h.slots, std::count_if(active_.begin(), active_.end(),
                                                   [&](const worker_at& w) { return w.host == h.host; }));
  }
  std::erase_if(*offered, [](const host_slots& h) { return h.slots == 0; });
  const int slots = total_slots(*offered);
  const auto plan = plan_slots(active_, *offered, min_np_, max_np_);
  if (plan.kept_for_min_np > 0)
    say_once("--host-discovery-script offers " + std::to_string(slots) + " slot(s) for " +
             std::to_string(active_.size()) + " worker(s); " + min_np_text() + " keeps " +
             std::to_string(plan.kept_for_min_np) + " more than that");
  std::string why;
  if (!plan.remove.empty()) {
    why = "--host-discovery-script offers " + std::to_string(slots) + " slot(s) for " +
          std::to_string(active_.size()) + " worker(s)";
    remove(plan.remove);
  }
  const int added = start(plan.start);
  if (added > 0) {
    change("host discovery added " + std::to_string(added) + " worker(s)" +
           (why.empty() ? "" : "; " + why + ": worker(s) " + ids_text(plan.remove) + " leave"));
  } else if (!plan.remove.empty()) {
    form(why + ": worker(s) " + ids_text(plan.remove) + " leave (no slot on their host; each at its next commit, " +
         "SIGTERM after " + cfg::number_text(std::chrono::duration<double>(timing_.leave_grace).count()) + " s)");
  }
}

void elastic_membership::remove(const std::vector<int>& ids) {
  const auto due = clock::now() + timing_.leave_grace;
  for (int id : ids) {
    auto it = std::find_if(active_.begin(), active_.end(), [&](const worker_at& w) { return w.id == id; });
    leaving_[id] = leaving{"--host-discovery-script offers no slot for it on host '" + it->host + "'", due, 0};
    active_.erase(it);
  }
}

// Starts a worker on each of `hosts` with the next ids, each told (in its variables) its place
// in the round it joins; returns how many started.
int elastic_membership::start(const std::vector<std::string>& hosts) {
  std::vector<worker_at> next = active_;
  for (size_t i = 0; i < hosts.size(); ++i) next.push_back({next_id_ + static_cast<int>(i), hosts[i]});
  const auto places = round_places(next);
  int added = 0;
  for (size_t i = active_.size(); i < next.size(); ++i) {
    const int id = next_id_++;
    if (!hooks_.start_worker(id, places[i], static_cast<int>(next.size()))) {
      refused_.insert(next[i].host);
      continue;
    }
    active_.push_back({id, next[i].host});  // the highest id yet: active_ stays ascending
    ++added;
  }
  return added;
}

void elastic_membership::enforce_leave_deadlines(clock::time_point now) {
  for (auto& [id, l] : leaving_) {
    if (!l.due || now < *l.due) continue;
    if (l.signals_sent == 0) {
      hooks_.say("worker " + std::to_string(id) + " was told to leave and still runs; sending SIGTERM");
      hooks_.signal_worker(id, SIGTERM);
      l.due = now + timing_.kill_grace;
    } else {
      hooks_.say("worker " + std::to_string(id) + " outlived SIGTERM; sending SIGKILL");
      hooks_.signal_worker(id, SIGKILL);
      l.due.reset();
    }
    ++l.signals_sent;
  }
}

// Horovod's HostManager.blacklist and the host event it sets: the host takes no new worker, and
// the workers still on it stop. They leave active_ now (told "leave" in the next round); their
// ids go to `stopping`, for SIGTERM once the job is known to go on. Returns what to add to the
// cause.
std::string elastic_membership::blacklist_host(const std::string& host, std::vector<int>& stopping) {
  const auto now = clock::now();
  const auto until = blacklist_.add(host, now);
  std::string text = "; host " + host + " is blacklisted ";
  if (until) {
    const double s = std::chrono::duration<double>(*until - now).count();
    text += "for " + cfg::number_text(std::round(s * 10) / 10) + " s (failure " +
            std::to_string(blacklist_.failures(host)) + " there, --blacklist-cooldown-range)";
  } else {
    text += "for the rest of the job (no --blacklist-cooldown-range)";
  }
  for (auto w = active_.begin(); w != active_.end();) {
    if (w->host != host) {
      ++w;
      continue;
    }
    leaving_[w->id] = leaving{"its host '" + host + "' is blacklisted: a worker there failed", std::nullopt, 0};
    stopping.push_back(w->id);
    w = active_.erase(w);
  }
  if (!stopping.empty()) text += "; worker(s) " + ids_text(stopping) + " there stop";
  return text;
}

std::string elastic_membership::blacklisted_text() const {
  const auto hosts = blacklist_.blocked_hosts(clock::now());
  return hosts.empty() ? "" : " (blacklisted host(s): " + names_text(hosts) + ")";
}

void elastic_membership::say_once(const std::string& message) {
  if (said_.insert(message).second) hooks_.say(message);
}

std::string elastic_membership::min_np_text() const { return "--min-np " + std::to_string(min_np_); }

}  // namespace chorus::chorusrun
