// The rules of elastic_policy.hpp: slots against workers, and the job below --min-np.
#include "bindings/cli/chorusrun/elastic_policy.hpp"

#include <algorithm>

namespace chorus::chorusrun {

slot_plan plan_slots(const std::vector<int>& active, int offered, int min_np, int max_np) {
  slot_plan plan;
  const int n = static_cast<int>(active.size());
  const int wanted = std::min(offered, max_np);
  if (wanted > n) {
    if (wanted >= min_np) plan.start = wanted - n;
    return plan;
  }
  const int keep = std::max(wanted, std::min(n, min_np));
  plan.kept_for_min_np = keep - wanted;
  plan.remove.assign(active.begin() + keep, active.end());
  return plan;
}

after_change decide_after_change(int active, int min_np, bool can_wait, bool waited_out) {
  if (active >= min_np) return after_change::form_round;
  if (can_wait && !waited_out) return after_change::wait_for_slots;
  return after_change::end_job;
}

}  // namespace chorus::chorusrun
