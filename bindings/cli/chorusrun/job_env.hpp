// What identifies one chorusrun job (rendezvous address, job secret, job id) and the
// environment each rank is started with. Built once before any rank is spawned.
#pragma once

#include <string>
#include <vector>

#include "bindings/cli/chorusrun/host_list.hpp"
#include "bindings/cli/chorusrun/options.hpp"
#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// Shared by every rank of the job.
struct job_identity {
  std::string rendezvous;  // "127.0.0.1:<port>", or CHORUS_RENDEZVOUS when set and non-empty
  std::string secret;      // 64 hex chars from 32 random bytes, or CHORUS_JOB_SECRET when set
                           // and non-empty (so a test or an outer launcher can choose it)
  std::string job_id;      // 16 hex chars from a random 64-bit id, fresh for every job; empty
                           // in per-node mode (not set for the ranks)
  int store_listener = -1;  // a socket listening on the rendezvous port, held from the choice of
                            // the port until rank 0 inherits it (CHORUS_RENDEZVOUS_FD); -1 when
                            // the port was given or rank 0 runs on another host
  // torch.distributed's MASTER_ADDR and MASTER_PORT for the ranks (rank 0's TCPStore): the
  // environment's when both are set; else the rendezvous host, and a port of its own: one
  // checked free here when chorusrun chose the rendezvous port, else the one below it (torch's
  // own convention puts Chorus at MASTER_PORT + 1), so every node of a per-node job agrees.
  std::string master_addr, master_port;
};

/// The job's rendezvous, secret and id. Rendezvous: CHORUS_RENDEZVOUS when set, else
/// --rendezvous, else a free port: when rank 0 starts here (no -H, or a loopback host without a
/// launcher) on 127.0.0.1 (or that loopback address), bound and held in store_listener so no
/// other process can take it before rank 0 serves on it; when rank 0 is on another host, a port
/// checked free here, not there (rank 0 reports a taken one, naming it). Secret: CHORUS_JOB_SECRET
/// when set, else 32 fresh random bytes; per-node mode with several nodes requires it set (every
/// node must use the same). Job id: fresh, except in per-node mode (empty: the ranks derive it
/// from the rendezvous address, alike on every node). Fails when the OS or OpenSSL does.
/// torch.distributed's MASTER_ADDR/MASTER_PORT as job_identity says (none for elastic jobs,
/// whose ranks change from round to round).
/// Elastic jobs: chorusrun serves the store itself: on CHORUS_HOST, else CHORUS_IFACE's address,
/// when set (hosts offered later reach it there); else on 127.0.0.1 when every worker starts here
/// (`this_host` is this host's name, launch_plan.hpp's starts_directly), else on the address
/// this host reaches the first remote worker's host from (tcp::address_toward), so that every host
/// on that network reaches it.
result<job_identity> make_job_identity(const launch_options& opts, const std::vector<placement>& placements,
                                       const std::string& this_host);


}  // namespace chorus::chorusrun
