// Horovod's join, the actor side: a rank that has joined takes part in every collective the
// other ranks agree on, with a stand-in op (handle 0) whose data is neutral: the identity of
// the reduce op for allreduce and reducescatter (runtime/collectives/neutral_elements.hpp), no rows
// for allgather and alltoall, a scratch buffer for broadcast. Built by the negotiator for an
// agreed id this rank never enqueued; ended silently by completion (no callback to call).
#pragma once

#include "actors/protocol.hpp"

namespace chorus {

/// The stand-in for `spec` (as negotiated: allgather/alltoall dim 0 is 0) on rank `rank` of
/// `size`; its buffers live in op_ref::filler.
op_ref make_join_filler(const tensor_spec& spec, int rank, int size, steady_time now);

/// True for a stand-in built by make_join_filler.
inline bool is_join_filler(const op_ref& op) { return op.handle == 0; }

}  // namespace chorus
