// After a job, however it ended: removes the shared-memory ring segments its local ranks may
// have left in /dev/shm (a rank that died between creating its segments and its peers opening
// them, runtime/transport/shm/lanes.cpp). Only names of this job and files of this user.
#pragma once

#include <string>

namespace chorus::chorusrun {

/// Unlinks /dev/shm/chorus-<job id>-* owned by this user; returns how many. `job_id_hex` is the
/// CHORUS_JOB_ID chorusrun gave the ranks (empty: nothing to do).
int remove_job_segments(const std::string& job_id_hex, const std::string& dir = "/dev/shm");

}  // namespace chorus::chorusrun
