// One rank as an OS process: fork+exec with its stdout/stderr on pipes, in its own process
// group, and the way to signal it (group and pid) without touching unrelated processes.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// A started rank as the supervisor tracks it.
struct rank_process {
  int rank = -1;
  pid_t pid = -1;       // also the id of the rank's process group
  int stdout_fd = -1;   // read end of the rank's stdout pipe (non-blocking), -1 once closed
  int stderr_fd = -1;   // read end of the rank's stderr pipe (non-blocking), -1 once closed
  bool reaped = false;  // waitpid has collected the exit status; the pid may be reused
  int wait_status = 0;  // as returned by waitpid, valid once reaped
};

/// Starts `command` (looked up in PATH like execvp, using PATH from `env`) as rank `rank` with
/// exactly the environment `env`, stdin from /dev/null (or a pipe holding `stdin_data`, closed
/// after it, when that is not empty), stdout and stderr on new pipes, in a
/// new process group led by the rank. A failing exec is reported by the child on its stderr
/// ("chorusrun: cannot execute ...") and ends it with status 127. `inherit_fd` (>= 3), when not
/// -1, stays open across the exec in this rank only (chorusrun's other descriptors are
/// close-on-exec).
result<rank_process> spawn_rank(int rank, const std::vector<std::string>& command,
                                const std::vector<std::string>& env, const std::string& stdin_data = {},
                                int inherit_fd = -1);

/// Sends `signo` to the rank's process group (so its children get it too) and, while the rank
/// is not reaped, to its pid. A group or pid that no longer exists is not an error.
void signal_rank(const rank_process& p, int signo);

}  // namespace chorus::chorusrun
