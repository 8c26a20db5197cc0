// chorus-bench negotiation: the cost of one negotiation cycle.
//   in one process (actors/in_process_job.hpp), N = 2 ... 1024 real negotiator actors, only
//   the wire modelled:
//     RESULT negotiation <strategy> <N> <link_latency_us> <cycle_p50_us> <cycle_p99_us> <max_messages_per_rank_per_cycle>
//   across real processes (under chorusrun, the pipeline's real control plane):
//     RESULT negotiation_processes <strategy> <N> <cycle_p50_us> <cycle_p99_us> <agreed_p50_us> <agreed_p99_us>
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/collectives/communicator.hpp"

namespace chorus::bench {

struct negotiation_bench_options {
  int ranks = 2;
  std::string strategy = "gossip";
  long link_latency_us = 20;
  int cycles = 50;             ///< measured cycles (after a few warm-up ones)
  int tensors = 1;             ///< new tensors per rank and cycle
  int threads = 2;             ///< CAF scheduler threads (in-process)
  bool busy_poll = false;      ///< CAF's default polling instead of sleeping workers (in-process)
  long gap_us = 2000;          ///< processes: idle time between cycles (a training step's compute)
  /// processes: after each cycle (and another gap) also time a 16-byte allreduce over the Asio
  /// data plane, the same exchange shape without CAF (CHORUS_BENCH_COMPARE_DATA_PLANE=1)
  bool compare_data_plane = false;
  /// in one process: the cycle time (default 0, no lower bound); processes: overrides
  /// CHORUS_CYCLE_TIME_MS when >= 0
  long cycle_time_us = -1;
};

/// In one process; prints the RESULT line. Throws on failure (a timeout names the ranks).
int run_negotiation_bench(const negotiation_bench_options& o);

/// Every process of a chorusrun job runs this; rank 0 prints the RESULT line.
int run_negotiation_processes_bench(communicator& comm, std::shared_ptr<tcp::control_link> control,
                                    const negotiation_bench_options& o);

}  // namespace chorus::bench
