// The supervisor runs one job: starts every rank, relays their prefixed output, reacts to rank
// exits, signals and the timeout, and returns chorusrun's exit status.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/elastic_membership.hpp"
#include "bindings/cli/chorusrun/elastic_policy.hpp"
#include "bindings/cli/chorusrun/job_env.hpp"
#include "bindings/cli/chorusrun/launch_plan.hpp"
#include "bindings/cli/chorusrun/options.hpp"

namespace chorus::chorusrun {

class elastic_coordinator;

struct supervisor_config {
  // Time the ranks get between SIGTERM (or a forwarded SIGINT) and SIGKILL.
  std::chrono::milliseconds kill_grace{3000};
  // Elastic mode (--min-np/--max-np) when set: a failing rank does not stop the job; the
  // membership (elastic_membership.hpp) forms a new round of the workers left, waits for slots,
  // or ends the job below --min-np.
  elastic_coordinator* elastic = nullptr;
  // Elastic mode: how long workers told to stop get to exit on their own before SIGTERM.
  std::chrono::milliseconds elastic_end_grace{10000};
  // Elastic mode: the membership's timings (requests, discovery, removed workers).
  elastic_timing elastic_timings;
  // This host's name, for the discovery script's lines.
  std::string host_name;
  // Elastic mode: the start of a worker the membership adds (worker id, its place in the round it
  // joins, the size of that round); an error says why it cannot start there.
  std::function<result<rank_launch>(int worker, const placement& at, int world_size)> elastic_launch;
};

/// The workers of an elastic job's first round, from their launches: a launch without a host
/// (a job all on this host) is on `host_name`.
std::vector<worker_at> first_workers(const std::vector<rank_launch>& launches, const std::string& host_name);

/// Runs the job to the end and returns the exit status for chorusrun:
///  - 0 when every rank exited 0 (elastic mode: every rank of the last round; ranks lost before
///    it, and workers removed because the discovery script offered fewer slots, do not count);
///  - 1 in elastic mode when fewer than --min-np workers were left (after --elastic-timeout,
///    with a discovery script);
///  - the first failing rank's exit status if in 1..255, else 1 (killed by a signal);
///  - 128 + signal number when chorusrun got SIGINT or SIGTERM first;
///  - 124 when --timeout expired first;
///  - 1 when a rank could not be started.
/// Returns only after every rank is reaped; leftover processes in the ranks' process groups
/// are killed. Owns the process-wide signal handlers while it runs.
/// `launches` says how each rank starts (launch_plan.hpp); a failing rank is named with its
/// host when the job spans hosts.
int run_job(const launch_options& opts, const job_identity& job, const std::vector<rank_launch>& launches,
            const supervisor_config& config = {});

}  // namespace chorus::chorusrun
