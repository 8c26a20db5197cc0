// SCHED_BATCH for the actors' threads (thread_policy.hpp).
#include "actors/thread_policy.hpp"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstring>

#include "runtime/core/log.hpp"

namespace chorus {

void batch_scheduling_hook::thread_started() {
#ifdef SCHED_BATCH
  sched_param none{};
  if (int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &none); rc != 0) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      CHORUS_LOG(debug, "pipeline", "SCHED_BATCH refused for the actors' threads: " << std::strerror(rc));
  }
#endif
}

bool runs_batch_scheduled() {
#ifdef SCHED_BATCH
  int policy = 0;
  sched_param p{};
  return pthread_getschedparam(pthread_self(), &policy, &p) == 0 && policy == SCHED_BATCH;
#else
  return false;
#endif
}

}  // namespace chorus
