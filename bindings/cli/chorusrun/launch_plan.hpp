// How each rank of a chorusrun job is started: the placements of all ranks (local, -H/hostfile
// or per-node mode), their job variables (CHORUS_* and horovodrun's HOROVOD_*), and the argv,
// environment and stdin of the process that starts each one. Pure: nothing runs here.
//
// Remote ranks start through ssh, or through --launcher TEMPLATE (its words with {host}
// replaced, then the rank command as separate words: nsenter, srun, docker exec, kubectl exec).
// Their job variables, the secret among them, travel on the rank's stdin as NAME=VALUE lines
// read by a small `sh -c` prologue, never on a command line that `ps` shows. The launcher gets
// chorusrun's environment less CHORUS_HOST (this host's address, not the remote rank's).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bindings/cli/chorusrun/host_list.hpp"
#include "bindings/cli/chorusrun/job_env.hpp"
#include "bindings/cli/chorusrun/options.hpp"

namespace chorus::chorusrun {

/// The start of one rank.
struct rank_launch {
  int rank = 0;
  std::string host;                  // for messages; "" when every rank is local
  std::vector<std::string> argv;     // what chorusrun executes
  std::vector<std::string> env;      // its environment, "NAME=VALUE"
  std::string stdin_data;            // written to its stdin then closed; empty: /dev/null
  int inherit_fd = -1;               // a descriptor the rank inherits (rank 0: job.store_listener,
                                     // named by CHORUS_RENDEZVOUS_FD); -1: none
};

/// Every rank's placement: one local host (`local_host_name`) without -H, the host list, or
/// this node's ranks in per-node mode.
result<std::vector<placement>> plan_placements(const launch_options& opts, const std::string& local_host_name);

/// The variables chorusrun sets for one rank, in a fixed order (job, -x, per-rank, HOROVOD_*).
/// An elastic worker's id is `worker`, or its first rank when -1.
std::vector<std::pair<std::string, std::string>> job_variables(const launch_options& opts, const job_identity& job,
                                                               const placement& p, int world_size, int worker = -1);

/// True when ranks on `host` start without a launcher: no -H or per-node mode (all local), or a
/// loopback name with no --launcher. An elastic job names its hosts even without -H (its
/// --host-discovery-script does): there this host's names (loopback ones and `this_host`, to
/// which main renames them) always start directly, as horovodrun's local workers do.
bool starts_directly(const launch_options& opts, const std::string& host, const std::string& this_host = {});

/// The launch of every rank. `base_env` is chorusrun's own environment ("NAME=VALUE"),
/// `this_host` this host's name (starts_directly).
/// Fails when a job variable for a remote rank holds a newline (it cannot cross stdin).
result<std::vector<rank_launch>> plan_launch(const launch_options& opts, const job_identity& job,
                                             const std::vector<placement>& placements,
                                             const std::vector<std::string>& base_env, const std::string& workdir,
                                             const std::string& this_host);

/// The launch of elastic worker `worker` added to a running job, at `p` (its place in the round
/// it joins, elastic_policy.hpp's round_places) of `world_size` workers: started like the first
/// workers, directly or through the launcher on p.host, with CHORUS_ELASTIC_WORKER=`worker`.
/// Fails, naming CHORUS_HOST and CHORUS_IFACE, when p.host is another host and the store listens
/// on a loopback address (job.rendezvous), which that host cannot reach.
result<rank_launch> elastic_worker_launch(const launch_options& opts, const job_identity& job, const placement& p,
                                          int world_size, int worker, const std::vector<std::string>& base_env,
                                          const std::string& workdir, const std::string& this_host);

/// `s` quoted for a POSIX shell ('...' with embedded quotes escaped).
std::string shell_quote(const std::string& s);

/// The default launcher for remote hosts.
inline constexpr const char* default_ssh_template = "ssh -o BatchMode=yes {host}";

}  // namespace chorus::chorusrun
