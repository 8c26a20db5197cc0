// What each of the two shared-memory mailboxes from one rank to another carries (lanes.hpp),
// and the name each goes by in logs and metrics.
#pragma once

namespace chorus::shm {

/// Each use has its own post numbers, so the calls of the one never interleave with the other's.
enum class mailbox_use : int {
  caller = 0,    ///< blocking allreduces on the calling thread (collectives/mailbox_allreduce.hpp)
  pipeline = 1,  ///< the pipeline's allreduces, in hand-out order (collectives/mailbox_queue.hpp)
};
constexpr int mailbox_uses = 2;

/// "caller" or "pipeline" (the `path` label of chorus_mailbox_sent_bytes_total).
constexpr const char* name_of(mailbox_use u) { return u == mailbox_use::caller ? "caller" : "pipeline"; }

}  // namespace chorus::shm
