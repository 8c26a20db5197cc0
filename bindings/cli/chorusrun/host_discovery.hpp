// --host-discovery-script for elastic jobs: runs the user's script (horovodrun's contract: one
// "host" or "host:slots" per line on stdout, exit 0) and reads how many slots it offers on this
// host. Only this host is used for now; other hosts are reported and left out.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/cli/chorusrun/launch_plan.hpp"
#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// What one run of the script offered.
struct discovered_hosts {
  int local_slots = 0;                     // slots on this host (a host without ":slots" has 1)
  std::vector<std::string> other_hosts;    // named hosts that are not this one, in order
};

/// Parses the script's output. `this_host` (gethostname), "localhost", "127.0.0.1" and "::1"
/// count as this host. A line that is not "host" or "host:N" with N > 0 is errc::invalid_argument
/// naming the line.
result<discovered_hosts> parse_discovery(std::string_view text, const std::string& this_host);

/// Runs `script` through `sh -c` with chorusrun's environment and returns its stdout. Errors
/// (errc::config): it cannot start, exits non-zero (with its stderr's start), or runs past
/// `bound` (then it is killed).
result<std::string> run_discovery_script(const std::string& script, std::chrono::milliseconds bound);

/// One discovery step of an elastic job: runs `script` and returns the slots it offers on this
/// host; nullopt when the script failed or printed a bad line. Other hosts and failures are
/// reported through `say_once` (what to do with the slots is elastic_policy.hpp's).
std::optional<int> offered_slots(const std::string& script, const std::string& this_host,
                                 std::chrono::milliseconds bound,
                                 const std::function<void(const std::string&)>& say_once);

/// The launch of a worker added later: `first`'s (a local elastic worker), with worker id `id`.
rank_launch new_worker_launch(const rank_launch& first, int id);

}  // namespace chorus::chorusrun
