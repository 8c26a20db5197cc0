// The typed configuration of a rank, read once from the CHORUS_* environment (with HOROVOD_*
// aliases) by read_config(). Every module takes its part of it; nothing else reads variables.
// Plain values; copy freely. Defaults are those of the table (variables.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/compression/options.hpp"
#include "runtime/config/defaults.hpp"
#include "runtime/config/reader.hpp"
#include "runtime/core/log.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

/// The data plane (runtime/transport).
struct transport_config {
  int num_streams = 8;                                ///< CHORUS_NUM_STREAMS
  int socket_buffer_bytes = 0;                        ///< CHORUS_SOCKET_BUFFER_BYTES; 0 = kernel autotuning
  std::size_t shm_bytes = 2u << 20;                   ///< CHORUS_SHM_BYTES; 0 = TCP only
  std::chrono::microseconds shm_spin{50};             ///< CHORUS_SHM_SPIN_US
  std::string host;                                   ///< CHORUS_HOST; empty: towards the rendezvous
  std::string iface;                                  ///< CHORUS_IFACE; empty: not used
  std::string host_id;                                ///< CHORUS_HOST_ID; empty: detected
  std::chrono::milliseconds connect_timeout{60000};   ///< CHORUS_CONNECT_TIMEOUT_SECONDS
  std::chrono::milliseconds peer_timeout{30000};      ///< CHORUS_PEER_TIMEOUT_SECONDS
};

/// The collectives (runtime/collectives).
struct collectives_config {
  std::size_t chunk_bytes = default_chunk_bytes; ///< CHORUS_CHUNK_BYTES
  bool chunk_bytes_given = false;          ///< CHORUS_CHUNK_BYTES was set: no cross-host default
  std::size_t segment_bytes = 512u << 10;  ///< CHORUS_SEGMENT_BYTES
  std::size_t small_bytes = 64u << 10;     ///< CHORUS_SMALL_ALLREDUCE_BYTES
  std::size_t caller_bytes = 4u << 20;     ///< CHORUS_CALLER_ALLREDUCE_BYTES
  std::string hierarchical = "auto";       ///< CHORUS_HIERARCHICAL: auto|on|off ("1" and "0" are read as on, off: synonyms in the table)
  std::string reduce_kernels = "auto";     ///< CHORUS_REDUCE_KERNELS: auto|portable
  compression wire = compression::none;   ///< CHORUS_COMPRESSION: the job's default
  shm_compression wire_on_shm = shm_compression::automatic;  ///< CHORUS_COMPRESSION_SHM
  nan_check check = nan_check::off;        ///< CHORUS_NAN_CHECK: the job's default
};

/// The actor pipeline and its negotiation (actors/).
struct pipeline_config {
  std::string negotiation = "gossip";           ///< CHORUS_NEGOTIATION
  std::chrono::microseconds cycle_time{1000};   ///< CHORUS_CYCLE_TIME_MS (HOROVOD_CYCLE_TIME)
  bool early_start = false;                     ///< CHORUS_EARLY_START
  bool hold_when_ahead = true;                  ///< CHORUS_HOLD_WHEN_AHEAD
  bool dynamic_process_sets = false;            ///< CHORUS_DYNAMIC_PROCESS_SETS (HOROVOD_DYNAMIC_PROCESS_SETS)
  std::size_t fusion_threshold = default_fusion_threshold;///< CHORUS_FUSION_THRESHOLD (HOROVOD_FUSION_THRESHOLD)
  std::size_t in_place_bytes = 1u << 20;        ///< CHORUS_IN_PLACE_BYTES
  std::chrono::seconds stall_check{60};         ///< CHORUS_STALL_CHECK_TIME_SECONDS (HOROVOD_...)
  std::chrono::seconds stall_shutdown{0};       ///< CHORUS_STALL_SHUTDOWN_TIME_SECONDS (HOROVOD_...)
  int scheduler_threads = 1;                    ///< CHORUS_SCHEDULER_THREADS
  bool scheduler_batch = true;                  ///< CHORUS_SCHEDULER_BATCH
  std::size_t start_window = 16;                ///< CHORUS_START_WINDOW
  bool priority = true;                         ///< CHORUS_PRIORITY
  std::size_t chunks_in_flight = 2;             ///< CHORUS_CHUNKS_IN_FLIGHT
  std::string stream_placement = "speed";       ///< CHORUS_STREAM_PLACEMENT
  std::string gpu_operations = "nccl";          ///< CHORUS_GPU_OPERATIONS (HOROVOD_GPU_OPERATIONS)
};

/// The autotuner (actors/autotuner_actor.hpp, runtime/tuning/).
struct autotune_config {
  bool enabled = false;             ///< CHORUS_AUTOTUNE (HOROVOD_AUTOTUNE)
  int max_streams = 0;              ///< CHORUS_MAX_STREAMS: top of the streams axis; 0 = CHORUS_NUM_STREAMS
  std::string log_path;             ///< CHORUS_AUTOTUNE_LOG (HOROVOD_AUTOTUNE_LOG)
  int warmup_samples = 3;           ///< CHORUS_AUTOTUNE_WARMUP_SAMPLES (HOROVOD_...)
  int steps_per_sample = 10;        ///< CHORUS_AUTOTUNE_STEPS_PER_SAMPLE (HOROVOD_...)
  int windows_per_sample = 3;       ///< CHORUS_AUTOTUNE_WINDOWS_PER_SAMPLE
  int max_samples = 30;             ///< CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES (HOROVOD_...)
  double noise = 0.1;               ///< CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE (HOROVOD_...)
  uint64_t seed = 1;                ///< CHORUS_AUTOTUNE_SEED
  double retune_drop = 0.15;        ///< CHORUS_AUTOTUNE_RETUNE_DROP
};

/// Metrics and tracing (telemetry/).
struct telemetry_config {
  std::string metrics_address = "127.0.0.1";  ///< CHORUS_METRICS_ADDR
  int metrics_port = 9400;                    ///< CHORUS_METRICS_PORT; 0 = metrics off
  std::string trace_dir;                      ///< CHORUS_TRACE; empty = off
  uint64_t trace_max_mb = 256;                ///< CHORUS_TRACE_MAX_MB; 0 = no bound
};

/// Everything read_config() reads. (Rank, size and rendezvous come from runtime/env.)
struct config {
  transport_config transport;
  collectives_config collectives;
  pipeline_config pipeline;
  autotune_config autotune;
  telemetry_config telemetry;
  log::level log_level = log::level::warn;  ///< CHORUS_LOG_LEVEL
};

/// Reads every variable of the table owned by config through `get`; the first bad value is
/// errc::config naming the variable, the value and what is allowed.
result<config> read_config(const env_lookup& get);
/// The same over the process environment; it also sets what is process-wide (the log level and
/// the kernel build, runtime/core) from what it read.
result<config> read_config();
/// Sets the log level from CHORUS_LOG_LEVEL in `get`, for programs that log before they read the
/// rest (chorusrun); a bad value leaves warn and is refused later by read_config().
void apply_log_level(const env_lookup& get);

/// The retired variables (variables.hpp) set in `get`: they have no effect. read_config() warns
/// of each once per process.
std::vector<std::string_view> retired_set(const env_lookup& get);

/// CHORUS_LOG_LEVEL's words to a level; nullopt-like false when `text` is not one of them.
bool parse_log_level(std::string_view text, log::level& out);

}  // namespace chorus
