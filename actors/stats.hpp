// Counters the pipeline's actors report (replies to stats_atom, see actors/protocol.hpp), for
// benchmarks, telemetry and the autotuner. Plain values: no CAF, so the public pipeline.hpp
// can expose them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus {

/// Counters of one stream, for telemetry and the autotuner.
struct stream_stats {
  int stream = 0;
  uint64_t chunks = 0;       ///< chunks this sender ran
  uint64_t bytes = 0;        ///< payload bytes of those chunks
  uint64_t busy_us = 0;      ///< time with at least one chunk in flight
  uint64_t stolen = 0;       ///< chunks this sender took from others
  uint64_t given = 0;        ///< chunks others took from this sender
  std::size_t max_in_flight = 0;
};

/// Counters of the negotiator.
struct negotiation_stats {
  uint64_t cycles = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t agreed_ops = 0;
  double p50_us = 0;  ///< enqueue → agreed, over the kept samples
  double p99_us = 0;
  std::size_t samples = 0;
};

}  // namespace chorus
