// The telemetry of a process' torch.distributed groups (ordered_group.hpp), from the
// configuration (CHORUS_METRICS_PORT, CHORUS_TRACE): one observer per process, made with its first
// group and shared by every group while one lives. Metrics are served at the metrics port plus
// the local rank, as a chorus.torch job's are (with both APIs in one process, whichever starts
// first serves; the other's metrics are off, with a warning), and carry the first group's stream
// counters; the trace goes to <CHORUS_TRACE>/c10d-rank-<r>.trace, apart from the actor
// pipeline's rank-<r>.trace. Every group reports its calls there (observer::on_call).
#pragma once

#include <memory>

#include "runtime/collectives/communicator.hpp"
#include "runtime/config/config.hpp"
#include "telemetry/observer.hpp"

namespace chorus::ordered {

/// The process' observer of ordered groups (null when all telemetry is off). `first` is the
/// group's data plane, whose counters the metrics read until forget(first).
std::shared_ptr<telemetry::observer> acquire_telemetry(communicator& first, const config& cfg);

/// `comm` closes: its counters are read no more (zeros from then on).
void forget_telemetry_source(const communicator* comm);

}  // namespace chorus::ordered
