// Pure decisions of an elastic job (no I/O, no clock, no processes): how the workers follow the
// hosts and slots a --host-discovery-script offers, how a round numbers its workers per host,
// and what follows when a worker leaves. The membership (elastic_membership.hpp) carries them
// out; tests/bindings/cli/elastic_policy_test.cpp holds them to the rules below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/host_list.hpp"

namespace chorus::chorusrun {

/// A worker of an elastic job and the host it runs on.
struct worker_at {
  int id = -1;
  std::string host;
  bool operator==(const worker_at&) const = default;
};

/// What to do with the workers after one run of the discovery script.
struct slot_plan {
  std::vector<std::string> start;  ///< one host per new worker (ids after every id used so far)
  std::vector<int> remove;         ///< workers to remove, ascending
  int kept_for_min_np = 0;         ///< workers without a slot that stay only because of --min-np
};

/// `active`: the workers in the job (not those already leaving), ascending by id. `offered`: the
/// hosts and slots the script offers, in its order (one entry per host). Rules:
///  1. Each host keeps its lowest ids up to its slots; workers on a host no longer offered, and
///     the highest ids beyond a host's slots, have no slot. Highest ids go first: the newest
///     workers, never the lowest id (rank 0, whose state the others take).
///  2. The job wants min(all slots offered, max_np) workers. More than it keeps: new workers on
///     the free slots, hosts in the script's order.
///  3. Those without a slot are removed when the workers kept and started reach --min-np (a
///     host swapped for another in one run). Otherwise only down to --min-np, highest ids first
///     (a job already below it loses nobody), and new workers start only if they bring the job
///     to --min-np (one started below it finds no round to join). Never every worker: the
///     lowest id stays (counted in kept_for_min_np) to hand the state on.
slot_plan plan_slots(const std::vector<worker_at>& active, const std::vector<host_slots>& offered, int min_np,
                     int max_np);

/// The places of `workers` (ascending by id) in one round: worker workers[i] gets rank i (the
/// lowest id, a worker that holds the state, is rank 0), its local rank among the workers on
/// its host, and horovodrun's cross rank and size (placement in host_list.hpp). Hosts are
/// numbered in the order their first worker appears.
std::vector<placement> round_places(const std::vector<worker_at>& workers);

/// What follows a change of the workers (one died, one asked for a new round).
enum class after_change { form_round, wait_for_slots, end_job };

/// `active`: workers left. `can_wait`: a discovery script is given, no worker has exited 0 (the
/// job is not finishing) and at least one worker is left to carry the state. `waited_out`: the
/// --elastic-timeout of this wait has passed.
///  - at least --min-np: form a round of them;
///  - fewer, can_wait and not waited_out: wait for slots (no round; the workers wait in init());
///  - else: end the job.
after_change decide_after_change(int active, int min_np, bool can_wait, bool waited_out);

/// --reset-limit N as horovodrun counts it (runner/elastic/registration.py): every round formed
/// after the first is a reset, whatever caused it (a failure, a worker's request, hosts added or
/// removed); N resets are allowed, and the job ends instead of forming reset N + 1. `resets_done`:
/// rounds formed after the first. False without a limit.
bool reset_limit_reached(int64_t resets_done, std::optional<int> limit);

}  // namespace chorus::chorusrun
