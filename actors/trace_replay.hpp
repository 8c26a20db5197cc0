// Trace replay on the real actors: every recorded rank gets a real negotiator and fusion
// actor in ONE actor system, wired to each other directly as local caf::actor handles (the
// in-process transport); a sink stands in for each rank's producer and completion, and no
// senders exist, so fusion plans buckets and chunks but never runs them. A capture observer
// per rank records the decisions (finished cycles, agreed batches, bucket plans).
//
// Driving, deterministically (CAF's test coordinator: one thread, a virtual clock):
//  1. For cycle c = 1..in.cycles, hand every rank the ops recorded as joining cycle c
//     (tensor_ready, in recorded order) before any rank may start c.
//  2. Move the virtual clock to the next timer and run every message, until nothing is left:
//     the ranks start or join cycle c, gossip, finish it, agree, plan. If cycle c did not run
//     (no rank had anything new), stop: every later cycle would carry another number.
// The negotiators run with cycle_time = 1 ms of virtual time and without early starts
// (negotiation_options::early_start), so a rank given several tensors in step 1 cannot start
// cycle c after the first of them: all of them join c, as in the recording. (Cycle 1 starts at once; a recorded rank joins cycle 1 with one tensor
// at most, since the first starts it.)
// Process sets are rebuilt from the recorded tensors: a set's members are the ranks that
// enqueued its tensors, under the recorded id (every member takes part in every one of them).
#pragma once

#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "telemetry/trace/replay.hpp"

namespace chorus {

/// Replays `in` (telemetry/trace/replay.hpp) with negotiation strategy `strategy`; the
/// decisions of each rank, in rank order. errc::config for an unknown strategy.
result<std::vector<telemetry::trace::rank_decisions>> replay_trace(const telemetry::trace::replay_input& in,
                                                                    const std::string& strategy = "gossip");

}  // namespace chorus
