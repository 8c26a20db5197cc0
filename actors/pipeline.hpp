// The actor pipeline of one rank (docs/design.md, section 2): boots a CAF actor system, spawns the
// producer, negotiator, fusion, one sender per stream and completion, connects this rank's
// negotiator to every peer's (the control plane: the data plane's control link, or CAF's I/O
// layer) and hands enqueued operations to them. Bulk bytes go through the communicator's data plane, never through CAF.
// Thread-safety: enqueue(), stats() and shutdown() may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "actors/stats.hpp"
#include "runtime/collectives/settings_check.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "telemetry/observer.hpp"

namespace chorus {

class communicator;
class process_set_table;

struct pipeline_options {
  std::string negotiation = "gossip";          ///< CHORUS_NEGOTIATION=gossip|central
  /// CHORUS_CONTROL_PLANE=tcp|caf: what carries gossip between ranks. tcp: the data plane's
  /// control link (actors/control_edge.hpp); caf: CAF remote actors behind a control gate
  /// (actors/control_plane.hpp), the slower alternative, kept to measure against.
  std::string control_plane = "tcp";
  std::chrono::microseconds cycle_time{1000};  ///< CHORUS_CYCLE_TIME_MS (alias HOROVOD_CYCLE_TIME), least cycle spacing, unless a bucket's worth waits (gossip: negotiation_options::start_bytes)
  /// CHORUS_EARLY_START=1: a rank that caught up with what its peers wait for starts a cycle at
  /// once, not after cycle_time (negotiation::negotiation_options::early_start).
  bool early_start = false;
  /// CHORUS_HOLD_WHEN_AHEAD=0|1: a rank ahead of its peers starts no cycle for new tensors; it
  /// joins the cycle the peers start when they catch up (negotiation::negotiation_options).
  bool hold_when_ahead = true;
  std::size_t fusion_threshold = 64u << 20;    ///< CHORUS_FUSION_THRESHOLD (alias HOROVOD_FUSION_THRESHOLD)
  std::size_t chunk_bytes = 4u << 20;          ///< CHORUS_CHUNK_BYTES
  /// false (CHORUS_CHUNK_BYTES not set): start() takes the communicator's chunk size, which is
  /// lower across hosts (collective_options::cross_host_chunk_bytes).
  bool chunk_bytes_given = true;
  /// CHORUS_IN_PLACE_BYTES: allreduce tensors at least this large are reduced in place instead
  /// of fused (no copy in or out; ResNet-50 at N=2 took ~100 ms a step this way against ~160 ms
  /// fusing everything); 0 = fuse everything up to fusion_threshold (Horovod's rule).
  std::size_t in_place_bytes = 1u << 20;
  std::chrono::seconds stall_check{60};        ///< CHORUS_STALL_CHECK_TIME_SECONDS (alias HOROVOD_STALL_CHECK_TIME_SECONDS), 0 = off
  std::chrono::seconds stall_shutdown{0};      ///< CHORUS_STALL_SHUTDOWN_TIME_SECONDS (alias HOROVOD_...), 0 = off
  int scheduler_threads = 1;                   ///< CHORUS_SCHEDULER_THREADS: CAF worker threads
  /// CHORUS_SCHEDULER_BATCH: the actors' threads run under SCHED_BATCH (actors/thread_policy.hpp).
  bool scheduler_batch = true;
  /// CHORUS_START_WINDOW: how far (in chunks) a rank may start ahead of its oldest unfinished chunk.
  std::size_t start_window = 16;
  /// CHORUS_CONNECT_TIMEOUT_SECONDS: control-plane rendezvous and connects at start().
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
/// whether the autotuner runs, the control plane and negotiation, and the fusion threshold,
/// chunk size and in-place threshold in force at start (they decide each chunk's tensors and
/// bytes; with the autotuner on, its starting point's).
setting_list pipeline_settings(const pipeline_options& o);

/// One collective operation handed to the pipeline. Buffers are caller-owned and untouched by
/// the caller until `done`.
struct op_request {
  tensor_spec spec;                 ///< name, kind (any collective_kind), dtype, shape, op, root, device
  /// allreduce/broadcast: == output (in place); allgather/alltoall: this rank's rows;
  /// reducescatter: the whole tensor (only read).
  const void* input = nullptr;
  /// allreduce/broadcast: the tensor; reducescatter: this rank's slice of dim 0 (Horovod's
  /// split, see runtime/collectives/scatter_plan.hpp: split_rows), written just before `done`;
  /// allgather/alltoall: nullptr (see below).
  void* output = nullptr;
  /// Called exactly once, from a pipeline thread: ok, or an error naming the tensor and rank(s).
  /// For allgather, `gathered` holds the concatenation (rank order) and `first_dims` each
  /// rank's dim 0; for alltoall, `gathered` holds the rows received (rank order) and
  /// `first_dims` how many came from each rank; empty otherwise.
  std::function<void(const status&, std::vector<std::byte> gathered, std::vector<int64_t> first_dims)> done;
  /// alltoall: rows of dim 0 sent to each rank, in rank order (size() entries summing to
  /// shape[0]); empty otherwise. (Last, so that {spec, input, output, done} still initializes.)
  std::vector<int64_t> splits;
  /// CUDA tensors: the device and the ready event (see op_ref).
  int device_index = 0;
  std::shared_ptr<void> ready;
};

/// Counters for benchmarks and metrics.
struct pipeline_stats {
  negotiation_stats negotiation;     ///< cycles, messages, enqueue → agreed p50/p99 (µs)
  std::vector<stream_stats> streams; ///< one per sender
};

class pipeline {
 public:
  /// Boots the actor system (middleman loaded, scheduler tuned for latency, all types
  /// registered), spawns the actors, publishes this rank's negotiator, exchanges ports
  /// through comm.store() ("ctrl/<rank>") and connects to every peer within
  /// opts.connect_timeout. `comm` must outlive the pipeline.
  static result<std::unique_ptr<pipeline>> start(communicator& comm, const pipeline_options& opts);

  /// Hands `r` to the producer; never blocks on the network. After shutdown() `r.done` runs
  /// at once, on the calling thread, with errc::shutdown.
  void enqueue(op_request r);
  /// enqueue() for several requests in one message: the producer admits them in order and
  /// the negotiator hands them to the strategy together (one cycle for ops ready together).
  void enqueue_all(std::vector<op_request> rs);

  /// Horovod's join: from now on this rank takes part in every collective the other ranks
  /// agree on with neutral data (the reduce op's identity, no rows), until every rank has
  /// joined; then `done` runs once, from a pipeline thread, with ok and the last rank to join
  /// (the same on every rank). A failure or shutdown ends it with that error and -1.
  void join(std::function<void(const status&, int last_rank)> done);

  /// Ends every op still in negotiation with errc::shutdown ("shut down with 'name' pending"),
  /// lets ops already on the data plane finish for up to opts.shutdown_grace, ends the rest
  /// with errc::shutdown, stops the actors. Idempotent. Ops failed after the grace may still
  /// be written by the data plane until communicator::close(): close it before freeing them.
  /// Never call it from a done callback (it waits for the actor that runs the callback).
  void shutdown();
  ~pipeline();

  /// Fixed-schedule switch, with autotune off: the tunables of every batch fusion plans from
  /// now on (streams used 1..num_streams, chunk size, fusion and in-place thresholds, cycle
  /// time), sent as the autotuner's tunables_switch is. Contract: the pipeline is quiescent on
  /// every rank (no operation enqueued and not yet called back) and every rank calls it with
  /// the same values before any rank enqueues again (e.g. between steps, before a barrier).
  /// Errors: errc::config while autotuning (the autotuner owns the tunables),
  /// errc::invalid_argument naming a value out of range, errc::shutdown after shutdown().
  status set_tunables(const telemetry::tunables& t);

  /// With autotune on, on one pipeline (so on the same connections) a benchmark compares the
  /// autotuner with fixed settings: held, the autotuner scores nothing and set_tunables works;
  /// resumed, it scores again, and with `restart` its search starts over from the tunables in
  /// force (snapped to its grid). set_tunables' contract holds: quiescent, every rank alike.
  /// hold_autotune is collective: ranks cut their windows where agreements happened to arrive,
  /// so it takes the most windows any rank submitted (an allreduce on the communicator) and
  /// every rank submits empty ones up to it, which the minimum ignores; it returns once all are
  /// agreed, every rank having handled the same windows.
  /// Errors: errc::config with autotune off, errc::timeout when a window is not agreed within
  /// 30 s, errc::shutdown after shutdown().
  status hold_autotune();
  status resume_autotune(bool restart);

  /// Asks the actors for their counters (waits at most one second; empty on timeout).
  pipeline_stats stats();

  int rank() const { return rank_; }
  int size() const { return size_; }

  struct impl;

 private:
  explicit pipeline(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  std::shared_mutex mu_;  // shared: enqueue, stats; exclusive: setting stopped_
  bool stopped_ = false;
};

}  // namespace chorus
