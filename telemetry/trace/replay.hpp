// Trace replay, the parts that need no actors: what the recorded traces of a job say each
// rank was given (the ops it made ready, each with the cycle it joined) and what it decided
// (finished cycles, agreed batches, bucket plans); and the comparison of those decisions with
// a replay's. The replay itself runs the real negotiator and fusion actors
// (actors/trace_replay.hpp); `chorus-trace replay DIR` ties the three together.
//
// Why cycles and not times: a cycle's agreed batch is a fixed function of every rank's
// contribution to it (runtime/negotiation/gossip.hpp, step 3), and each ready record carries
// the cycle its tensor joined on that rank (negotiation_strategy::contribution_cycle()). A
// replay that hands every rank the tensors of cycle c before the ranks start cycle c must
// therefore reach the same batches, whatever the wall-clock timing was.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "telemetry/observer.hpp"
#include "telemetry/trace/reader.hpp"

namespace chorus::telemetry::trace {

/// One op as a rank handed it to negotiation.
struct replay_op {
  uint64_t cycle = 0;     ///< the cycle it joined on this rank (the ready record's cycle)
  uint64_t handle = 0;
  tensor_spec spec;       ///< as negotiated (allgather: shape[0] is 0)
  int64_t first_dim = 0;  ///< allgather, alltoall: this rank's rows (from the enqueue record)
};

/// What one rank decided, recorded or replayed.
struct rank_decisions {
  std::vector<uint64_t> cycles;                          ///< finished cycles, in order
  std::map<uint64_t, std::vector<std::string>> agreed;   ///< cycle → agreed names, in order
  std::vector<bucket_event> buckets;                     ///< in plan order
};

/// An autotune window score this rank contributed to a cycle (from its round-0 gossip).
struct replay_score {
  double score = 0;
  uint64_t digest = 0;
};

struct replay_rank {
  int rank = 0;
  tunables tuning;               ///< the first tunables record
  std::size_t direct_max_bytes = 0;  ///< the direct_path record (0: none)
  std::vector<replay_op> ops;    ///< in ready order
  std::map<uint64_t, replay_score> scores;   ///< cycle → the window score contributed to it
  std::vector<autotune_event> autotune;      ///< the autotuner's windows and switches, in order
  rank_decisions recorded;
};

struct replay_input {
  int size = 0;
  /// Cycles 1..cycles are replayed and compared: the last cycle every rank's trace holds.
  uint64_t cycles = 0;
  std::vector<replay_rank> ranks;
};

/// Extracts the replay input from the traces of every rank (read_trace_dir). An error when a
/// rank has no tunables record or lost records (its trace is not the whole story).
result<replay_input> replay_input_from(const std::vector<trace_file>& files);

struct replay_verdict {
  bool match = false;
  uint64_t cycles = 0;           ///< cycles compared
  uint64_t tensors = 0;          ///< ops agreed in them (counted once, as every rank agrees them)
  uint64_t autotune_windows = 0; ///< autotune windows recorded (alike on every rank)
  std::string difference;        ///< the first one: "cycle C, rank R: what: expected X, got Y"
  /// "replay matches: <cycles> cycles, <tensors> tensors" or "replay differs at <difference>".
  std::string text() const;
};

/// Compares cycle by cycle (then rank by rank): which cycles ran, the agreed batch, the
/// buckets planned from it; then the autotuner's records, which every rank must share (the
/// same windows, scores, switches and digests). Stops at the first difference.
replay_verdict compare(const replay_input& in, const std::vector<rank_decisions>& replayed);

}  // namespace chorus::telemetry::trace
