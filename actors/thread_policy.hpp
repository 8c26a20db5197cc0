// The scheduling policy of the actor pipeline's own threads: CAF's workers and its timer run
// under Linux's SCHED_BATCH, so that a woken actor takes an idle core at once but does not
// preempt a busy one, the data plane's or the framework's thread (CHORUS_SCHEDULER_BATCH; why
// and what it measured: docs/design.md, "The actors' threads"). A thread started from one of
// them, such as by a done callback, inherits the policy.
#pragma once

#include <caf/thread_hook.hpp>

namespace chorus {

/// A CAF thread hook: every thread the actor system starts runs under SCHED_BATCH. A refusal
/// (a sandbox without the policy) is logged once and changes nothing else.
class batch_scheduling_hook : public caf::thread_hook {
 public:
  void init(caf::actor_system&) override {}
  void thread_started() override;
  void thread_terminates() override {}
};

/// Whether the calling thread runs under SCHED_BATCH (the kernel's answer).
bool runs_batch_scheduled();

}  // namespace chorus
