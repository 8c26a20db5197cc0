// The scheduling policy of the actor pipeline's own threads: CAF's workers and its timer (with
// the CAF control plane also its network thread and detached actors); a thread started from
// one of them, such as by a done callback, inherits it.
// The actors keep books: they admit ops, negotiate, plan buckets and call callbacks back, while
// the bytes move on other threads (the data plane's, the framework's). Under Linux's default
// policy a thread that wakes preempts the one running on its core, so on a host whose cores
// are all busy (every core runs a rank) each completion or gossip message that wakes the actors
// stops a running transfer for as long as the actors work, and with two ranks in lockstep
// both transfers wait. Under SCHED_BATCH a woken actor thread still takes an idle core at
// once, but waits for the running thread's time slice on a busy one
// (CHORUS_SCHEDULER_BATCH, docs/design.md "The actors' threads").
#pragma once

#include <caf/thread_hook.hpp>

namespace chorus {

/// A CAF thread hook: every thread the actor system starts runs under SCHED_BATCH. A refusal
/// (a sandbox or platform without the policy) is logged once and changes nothing else.
class batch_scheduling_hook : public caf::thread_hook {
 public:
  void init(caf::actor_system&) override {}
  void thread_started() override;
  void thread_terminates() override {}
};

/// Whether the calling thread runs under SCHED_BATCH (tests).
bool runs_batch_scheduled();

}  // namespace chorus
