// The negotiation's clock, and what one rank did in one cycle: the strategies report it
// (strategy.hpp) and telemetry's observers receive it as it is (telemetry/observer.hpp).
#pragma once

#include <chrono>
#include <cstdint>

namespace chorus::negotiation {

using clock = std::chrono::steady_clock;
using time_point = clock::time_point;
using duration = clock::duration;

/// What one rank did in one cycle, for metrics and the message-count invariants.
struct cycle_stats {
  uint64_t cycle = 0;
  uint32_t messages_sent = 0;
  uint32_t messages_received = 0;
  time_point started;
  time_point finished;
};

}  // namespace chorus::negotiation
