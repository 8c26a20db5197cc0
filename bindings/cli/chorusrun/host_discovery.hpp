// --host-discovery-script for elastic jobs: runs the user's script (horovodrun's contract: one
// "host" or "host:slots" per line on stdout, exit 0) and reads which hosts it offers, with how
// many slots each; and the wait at the start of a job until it offers --min-np slots.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings/cli/chorusrun/host_list.hpp"
#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// Parses the script's output into hosts in the order first named, each once (slots of a host
/// named twice add up; a host without ":slots" has 1). `this_host` (gethostname), "localhost",
/// "127.0.0.1" and "::1" are this host, named `this_host`. A line that is not "host" or "host:N"
/// with N > 0 is errc::invalid_argument naming the line.
result<std::vector<host_slots>> parse_discovery(std::string_view text, const std::string& this_host);

/// Runs `script` through `sh -c` with chorusrun's environment and returns its stdout. Errors
/// (errc::config): it cannot start, exits non-zero (with its stderr's start), or runs past
/// `bound` (then it is killed).
result<std::string> run_discovery_script(const std::string& script, std::chrono::milliseconds bound);

/// One discovery step of an elastic job: runs `script` and returns the hosts it offers; nullopt
/// when the script failed or printed a bad line (said through `say_once`; what to do with the
/// hosts is elastic_policy.hpp's).
std::optional<std::vector<host_slots>> offered_hosts(const std::string& script, const std::string& this_host,
                                                     std::chrono::milliseconds bound,
                                                     const std::function<void(const std::string&)>& say_once);

/// All slots in `hosts`.
int total_slots(const std::vector<host_slots>& hosts);

/// The start of an elastic job with a script and no -H (horovodrun's): runs it every `interval`
/// until it offers at least `min_np` slots and returns those hosts; after `timeout` without,
/// errc::config naming --elastic-timeout and the slots last offered. Says once that it waits.
result<std::vector<host_slots>> wait_for_slots(const std::string& script, const std::string& this_host, int min_np,
                                               std::chrono::duration<double> timeout,
                                               std::chrono::milliseconds interval, std::chrono::milliseconds bound,
                                               const std::function<void(const std::string&)>& say);

}  // namespace chorus::chorusrun
