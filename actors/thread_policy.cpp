// SCHED_BATCH for the actors' threads (thread_policy.hpp).
#include "actors/thread_policy.hpp"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstring>

#include "runtime/core/log.hpp"

namespace chorus {

void batch_scheduling_hook::thread_started() {
  sched_param none{};
  if (int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &none); rc != 0) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      CHORUS_LOG(info, "pipeline", "SCHED_BATCH refused for the actors' threads (" << std::strerror(rc)
                                                                                    << "); they keep the default policy");
  }
}

bool runs_batch_scheduled() { return sched_getscheduler(0) == SCHED_BATCH; }

}  // namespace chorus
