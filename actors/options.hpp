// The pipeline's settings (pipeline_options), read from runtime/config, and those every rank
// must be given alike. Plain values, used by the pipeline and by the actors it configures.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/collectives/hier_schedule.hpp"
#include "runtime/collectives/settings_check.hpp"
#include "runtime/config/defaults.hpp"
#include "runtime/config/config.hpp"
#include "telemetry/observer.hpp"

namespace chorus {

class process_set_table;

struct pipeline_options {
  std::string negotiation = "gossip";          ///< CHORUS_NEGOTIATION=gossip|central
  std::chrono::microseconds cycle_time{1000};  ///< CHORUS_CYCLE_TIME_MS (alias HOROVOD_CYCLE_TIME), least cycle spacing, unless a bucket's worth waits (gossip: negotiation_options::start_bytes)
  /// CHORUS_EARLY_START=1: a rank that caught up with what its peers wait for starts a cycle at
  /// once, not after cycle_time (negotiation::negotiation_options::early_start).
  bool early_start = false;
  /// CHORUS_HOLD_WHEN_AHEAD=0|1: a rank ahead of its peers starts no cycle for new tensors; it
  /// joins the cycle the peers start when they catch up (negotiation::negotiation_options).
  bool hold_when_ahead = true;
  std::size_t fusion_threshold = default_fusion_threshold;  ///< CHORUS_FUSION_THRESHOLD (alias HOROVOD_FUSION_THRESHOLD)
  std::size_t chunk_bytes = default_chunk_bytes;            ///< CHORUS_CHUNK_BYTES
  /// false (CHORUS_CHUNK_BYTES not set): start() lowers chunk_bytes across hosts as the
  /// communicator does (runtime/collectives/chunk_size.hpp).
  bool chunk_bytes_given = true;
  /// CHORUS_HIERARCHICAL, for the chunk size across hosts (chunk_size.hpp).
  hier_mode hierarchical = hier_mode::automatic;
  /// CHORUS_IN_PLACE_BYTES: allreduce tensors at least this large are reduced in place instead
  /// of fused (no copy in or out; ResNet-50 at N=2 took ~100 ms a step this way against ~160 ms
  /// fusing everything); 0 = fuse everything up to fusion_threshold (Horovod's rule).
  std::size_t in_place_bytes = 1u << 20;
  std::chrono::seconds stall_check{60};        ///< CHORUS_STALL_CHECK_TIME_SECONDS (alias HOROVOD_STALL_CHECK_TIME_SECONDS), 0 = off
  std::chrono::seconds stall_shutdown{0};      ///< CHORUS_STALL_SHUTDOWN_TIME_SECONDS (alias HOROVOD_...), 0 = off
  int scheduler_threads = 1;                   ///< CHORUS_SCHEDULER_THREADS: CAF worker threads
  /// CHORUS_SCHEDULER_BATCH: the actors' threads run under SCHED_BATCH (actors/thread_policy.hpp).
  bool scheduler_batch = true;
  /// CHORUS_START_WINDOW: chunks a rank hands to its streams before the first of them ends.
  std::size_t start_window = 16;
  /// CHORUS_PRIORITY: chunks go in priority order (actors/fusion_actor.hpp); every rank alike.
  bool priority = true;
  /// CHORUS_CONNECT_TIMEOUT_SECONDS: the rendezvous exchanges at start() (the settings every
  /// rank must share, the GPU agreement).
  std::chrono::milliseconds connect_timeout{60000};
  /// How long shutdown() lets chunks already on the data plane finish before failing their ops.
  std::chrono::milliseconds shutdown_grace{2000};
  /// CHORUS_CHUNKS_IN_FLIGHT: chunks one sender runs at once (an older chunk may exceed it,
  /// see actors/sender_actor.hpp).
  std::size_t chunks_in_flight = 2;
  /// CHORUS_STREAM_PLACEMENT=speed|round_robin: speed places each chunk on the stream expected
  /// to finish it first, by observed rate (runtime/collectives/stream_board.hpp); round_robin
  /// by sequence.
  std::string stream_placement = "speed";
  /// Upper bound on pooled fusion buffers (bytes); buckets beyond it use a heap buffer.
  std::size_t pool_bytes = 256u << 20;
  /// CHORUS_GPU_OPERATIONS=nccl|host: how CUDA tensors move (actors/device_runner.hpp). nccl
  /// needs every rank to have a GPU of its own; the job agrees at start, else it stages.
  std::string gpu_operations = "nccl";
  /// Ranks of this job on this host (process_env::local_size; not a variable of its own).
  int local_size = 1;
  /// CHORUS_PEER_TIMEOUT_SECONDS: how long an NCCL collective may wait for a peer.
  std::chrono::milliseconds peer_timeout{30000};
  /// CHORUS_AUTOTUNE and its settings (actors/autotuner_actor.hpp): when enabled, the
  /// tunables above are where the search starts (snapped to its grid), CHORUS_NUM_STREAMS
  /// connections are opened and 1 .. that many are used.
  autotune_config autotune;
  /// Streams (senders) that get chunks from the start, 1..CHORUS_NUM_STREAMS; 0: all. With
  /// autotune on, where its streams axis starts. Not a variable (benchmarks set it).
  int start_streams = 0;
  /// With autotune on: start it held (hold_autotune), so that set_tunables drives the pipeline
  /// until resume_autotune. Not a variable (benchmarks set it).
  bool autotune_held = false;
  /// Where the actors report (telemetry/setup.hpp builds it from CHORUS_METRICS_*,
  /// CHORUS_TRACE); null: telemetry off. Not set by from_config().
  std::shared_ptr<telemetry::observer> observer;
  /// The job's process sets (runtime/process_sets); null: the global set only. The same sets,
  /// registered in the same order, on every rank. Not set by from_config().
  std::shared_ptr<process_set_table> process_sets;
  /// The configured values of the variables above (runtime/config: read_config()); the
  /// fields without a variable keep their defaults.
  static pipeline_options from_config(const config& c);
};

/// The settings of `o` every rank must be given alike (checked at start through the
/// rendezvous, runtime/collectives/settings_check.hpp), as (variable, value) in a fixed order:
/// whether the autotuner runs, the negotiation, and the fusion threshold,
/// chunk size and in-place threshold in force at start (they decide each chunk's tensors and
/// bytes; with the autotuner on, its starting point's).
setting_list pipeline_settings(const pipeline_options& o);

}  // namespace chorus
