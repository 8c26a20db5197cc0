// The rules of elastic_policy.hpp: hosts and slots against workers, the places of a round, and
// the job below --min-np.
#include "bindings/cli/chorusrun/elastic_policy.hpp"

#include <algorithm>
#include <map>

namespace chorus::chorusrun {

slot_plan plan_slots(const std::vector<worker_at>& active, const std::vector<host_slots>& offered, int min_np,
                     int max_np) {
  slot_plan plan;
  std::map<std::string, int> room;  // free slots per host
  int offered_total = 0;
  for (const auto& h : offered) {
    room[h.host] += h.slots;
    offered_total += h.slots;
  }
  // 1. Ascending ids take the slots of their host first; the rest have none.
  std::vector<int> without_slot;
  for (const auto& w : active) {
    auto it = room.find(w.host);
    if (it != room.end() && it->second > 0) {
      --it->second;
    } else {
      without_slot.push_back(w.id);
    }
  }
  // 2-3. Without a slot, out; new workers on the free slots, if that keeps --min-np.
  const int n = static_cast<int>(active.size());
  const int without = static_cast<int>(without_slot.size());
  const int wanted = std::min(offered_total, max_np);
  int free = 0;
  for (const auto& [host, left] : room) free += left;
  auto starts_for = [&](int kept) { return std::clamp(wanted - kept, 0, free); };
  int removed = without;
  int starts = starts_for(n - without);
  if (n - without + starts < min_np) {
    // Short of --min-np even with new workers: remove only down to it (nobody from a job already
    // below), and start workers only if that reaches it.
    removed = std::min(without, n - std::min(n, min_np));
    starts = starts_for(n - removed);
    if (n - removed + starts < min_np) starts = 0;
  }
  if (n > 0 && removed == n) {
    // Never every worker: the lowest id stays to hand the state on to the new ones.
    removed = n - 1;
    starts = starts_for(1);
    if (1 + starts < min_np) starts = 0;
  }
  plan.remove.assign(without_slot.end() - removed, without_slot.end());
  plan.kept_for_min_np = without - removed;
  for (const auto& h : offered) {
    for (int& left = room[h.host]; left > 0 && static_cast<int>(plan.start.size()) < starts; --left)
      plan.start.push_back(h.host);
  }
  return plan;
}

std::vector<placement> round_places(const std::vector<worker_at>& workers) {
  std::vector<std::string> hosts;     // in order of first appearance
  std::map<std::string, int> on_host;  // workers so far per host
  std::vector<placement> out;
  for (size_t i = 0; i < workers.size(); ++i) {
    const auto& w = workers[i];
    auto at = std::find(hosts.begin(), hosts.end(), w.host);
    if (at == hosts.end()) at = hosts.insert(hosts.end(), w.host);
    placement p;
    p.rank = static_cast<int>(i);
    p.host = w.host;
    p.host_index = static_cast<int>(at - hosts.begin());
    p.local_rank = on_host[w.host]++;
    out.push_back(p);
  }
  // Cross rank: among the hosts that have a worker with this local rank, in host order.
  for (auto& p : out) {
    p.local_size = on_host[p.host];
    p.cross_rank = 0;
    p.cross_size = 0;
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (on_host[hosts[h]] <= p.local_rank) continue;
      if (static_cast<int>(h) < p.host_index) ++p.cross_rank;
      ++p.cross_size;
    }
  }
  return out;
}

after_change decide_after_change(int active, int min_np, bool can_wait, bool waited_out) {
  if (active >= min_np) return after_change::form_round;
  if (can_wait && !waited_out) return after_change::wait_for_slots;
  return after_change::end_job;
}

bool reset_limit_reached(int64_t resets_done, std::optional<int> limit) {
  return limit && resets_done >= *limit;
}

}  // namespace chorus::chorusrun
