// What identifies one chorusrun job (rendezvous address, job secret, job id) and the
// environment each rank is started with. Built once before any rank is spawned.
#pragma once

#include <string>
#include <vector>

#include "bindings/cli/chorusrun/options.hpp"
#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// Shared by every rank of the job.
struct job_identity {
  std::string rendezvous;  // "127.0.0.1:<port>", or CHORUS_RENDEZVOUS when set and non-empty
  std::string secret;      // 64 hex chars from 32 random bytes, or CHORUS_JOB_SECRET when set
                           // and non-empty (so a test or an outer launcher can choose it)
  std::string job_id;      // 16 hex chars from a random 64-bit id, fresh for every job
};

/// Picks a free port on 127.0.0.1 (unless CHORUS_RENDEZVOUS is set) and draws a fresh secret
/// (unless CHORUS_JOB_SECRET is set) and job id. Fails when the OS or OpenSSL does. The port is
/// free when picked; another process may take it before rank 0 binds it (rank 0 then reports a
/// rendezvous error).
result<job_identity> make_job_identity();

/// The full environment ("NAME=VALUE" entries) of rank `rank`: chorusrun's own environment,
/// then the job's variables, then `-x` settings, then the per-rank variables. A later entry
/// replaces an earlier one of the same name, so each name appears once.
std::vector<std::string> rank_environment(const launch_options& opts, const job_identity& job,
                                          int rank);

}  // namespace chorus::chorusrun
