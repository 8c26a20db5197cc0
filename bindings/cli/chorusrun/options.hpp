// chorusrun's command line: `chorusrun -np N [options] -- command args...` parsed into one
// value. Parsing is pure (no I/O, no exit); main decides what to print and which code to return.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bindings/cli/chorusrun/host_blacklist.hpp"
#include "bindings/cli/chorusrun/host_list.hpp"
#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// Everything the user asked for on the command line.
struct launch_options {
  int num_ranks = 0;                                       // -np / -n: ranks to start (> 0)
  std::vector<std::pair<std::string, std::string>> extra_env;  // -x NAME=VALUE, in order given
  std::optional<int> num_streams;                          // --streams: sets CHORUS_NUM_STREAMS
  std::optional<double> timeout_seconds;                   // --timeout: stop the job after this
  bool prefix_output = true;                               // false with --no-prefix
  bool show_help = false;                                  // -h / --help: print usage, run nothing
  std::vector<std::string> command;                        // program and its arguments
  std::vector<host_slots> hosts;          // -H (or --hostfile, read by main); empty: all local
  std::optional<std::string> hostfile;    // --hostfile FILE, before main reads it into hosts
  std::optional<std::string> launcher_template;  // --launcher 'cmd ... {host} ...'; default ssh
  std::optional<int> nnodes;              // --nnodes M: per-node mode, -np is ranks per node
  int node_rank = 0;                      // --node-rank R in [0, M)
  std::optional<std::string> rendezvous;  // --rendezvous ADDR:PORT
  std::optional<int> min_np;              // --min-np: elastic; the job ends below this many workers
  std::optional<int> max_np;              // --max-np: elastic; at most this many workers
  std::optional<std::string> discovery_script;  // --host-discovery-script: elastic; slots to fill
  // --elastic-timeout: elastic with a discovery script; how long to wait below --min-np for
  // slots. Unset after parsing: main takes CHORUS_ELASTIC_TIMEOUT_SECONDS (HOROVOD_ELASTIC_TIMEOUT).
  std::optional<double> elastic_timeout_seconds;
  // --blacklist-cooldown-range MIN MAX: elastic; a host blacklisted for a failed worker comes
  // back after a cooldown (host_blacklist.hpp); unset: it stays out for the job's life.
  std::optional<cooldown_range> blacklist_cooldown;
  std::optional<int> reset_limit;         // --reset-limit N: elastic; end the job instead of reset N + 1
  bool blacklist = true;                  // false with --no-blacklist: failed workers' hosts stay usable

  /// True with --min-np, --max-np or --host-discovery-script: a dying worker does not end the
  /// job (elastic_coordinator).
  bool elastic() const { return min_np || max_np || discovery_script; }
};

/// Parses argv (argv[0] is skipped). A usage error comes back as errc::invalid_argument with a
/// message naming the offending argument; the caller prints it with the usage text, exit 2.
result<launch_options> parse_options(std::span<const char* const> argv);

/// Checks the options that depend on each other once `hosts` is final (after --hostfile is
/// read): -np against the slots, per-node mode against a host list, {host} in --launcher.
status check_options(const launch_options& opts);

/// The usage text, ending in a newline.
std::string usage_text();

}  // namespace chorus::chorusrun
