// Which telemetry a rank runs, from its configuration (runtime/config): the Prometheus exposer
// (CHORUS_METRICS_PORT, CHORUS_METRICS_ADDR) and the trace recorder (CHORUS_TRACE,
// CHORUS_TRACE_MAX_MB), fanned out into one observer for the actor pipeline.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/config/config.hpp"
#include "runtime/core/status.hpp"
#include "runtime/transport/shm/mailbox_use.hpp"
#include "runtime/transport/transport.hpp"
#include "telemetry/observer.hpp"

namespace chorus::telemetry {

/// Bytes a stream moved so far: the data plane's own counters (runtime/transport/transport.hpp).
using stream_traffic = chorus::stream_traffic;

/// What telemetry needs to know about the rank it observes.
struct context {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int streams = 1;
  /// Reads the data plane's byte counters of one stream (may be empty: counters stay 0).
  std::function<stream_traffic(int stream)> traffic;
  /// The counters of one stream's connection to one peer (may be empty: no per-peer series).
  std::function<stream_traffic(int stream, int peer)> peer_traffic;
  /// Local and remote port of that connection (may be empty: no connection_info series).
  std::function<std::pair<int, int>(int stream, int peer)> ports;
  /// Payload bytes posted through shared-memory mailboxes, by use: the caller's blocking
  /// allreduces or the pipeline's direct path (communicator::mailbox_sent; may be empty: no
  /// such series).
  std::function<uint64_t(shm::mailbox_use)> mailbox_sent;
  /// The trace file's name before the rank: "rank-" (the actor pipeline's), "c10d-rank-"
  /// (torch.distributed groups', bindings/ordered/group_telemetry.hpp).
  std::string trace_prefix = "rank-";
  /// Compression asked for by ops among all ranks is dropped: every peer shares memory
  /// (runtime/collectives/compression_policy.hpp), shown as a gauge.
  bool compression_off_on_shm = false;
};

/// The observer the configuration asks for (runtime/config: telemetry_config), or null when all
/// telemetry is off. errc::config naming the variable when a part cannot be set up as asked.
result<std::shared_ptr<observer>> observer_from_config(const context& ctx, const telemetry_config& c);

}  // namespace chorus::telemetry
