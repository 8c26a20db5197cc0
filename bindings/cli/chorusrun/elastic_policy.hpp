// Pure decisions of an elastic job (no I/O, no clock, no processes): how the workers follow the
// slots a --host-discovery-script offers, and what follows when a worker leaves. The membership
// (elastic_membership.hpp) carries them out; tests/bindings/cli/elastic_policy_test.cpp holds
// them to the rules below.
#pragma once

#include <vector>

namespace chorus::chorusrun {

/// What to do with the workers after one run of the discovery script.
struct slot_plan {
  int start = 0;            ///< new workers to start (with ids after every id used so far)
  std::vector<int> remove;  ///< workers to remove, ascending: the highest ids of `active`
  int kept_for_min_np = 0;  ///< workers that stay only because --min-np forbids removing them
};

/// `active`: the ids of the workers in the job (not those already leaving), ascending.
/// `offered`: the slots the script offers here. Rules:
///  1. The job wants min(offered, max_np) workers.
///  2. More than active: start the difference, unless the job would still be below --min-np with
///     them (a worker started then finds no round to join): then none.
///  3. Fewer: remove the highest ids until that many are left, never below --min-np (so a job
///     already below --min-np loses nobody). Highest ids go first: the newest workers, never the
///     lowest id (rank 0, whose state the others take).
slot_plan plan_slots(const std::vector<int>& active, int offered, int min_np, int max_np);

/// What follows a change of the workers (one died, one asked for a new round).
enum class after_change { form_round, wait_for_slots, end_job };

/// `active`: workers left. `can_wait`: a discovery script is given, no worker has exited 0 (the
/// job is not finishing) and at least one worker is left to carry the state. `waited_out`: the
/// --elastic-timeout of this wait has passed.
///  - at least --min-np: form a round of them;
///  - fewer, can_wait and not waited_out: wait for slots (no round; the workers wait in init());
///  - else: end the job.
after_change decide_after_change(int active, int min_np, bool can_wait, bool waited_out);

}  // namespace chorus::chorusrun
