// The fusion actor: one per rank. Receives batch_agreed from the negotiator and window_moved
// from completion; sends bucket_planned to completion and chunk_work to the senders.
// It turns an agreed batch into buckets (plan_buckets) and chunks (plan_chunks) with global
// sequence numbers from data_plane::pipeline_sequence_base plus a running counter. Every
// rank sees the same batches in the same order and plans alike, so the numbers match across
// ranks without any exchange. A fused bucket takes a pooled, pre-touched buffer when its first
// chunk is handed out (so pooled memory follows the start window, not the batch), and each
// chunk is packed just before it is handed out; a single tensor runs in place. An allgather
// takes two sequences: the per-rank dim 0 (counts) first, then the rows; so does an alltoall
// (every rank's splits, then the rows). A reducescatter runs on a pooled copy of its input,
// one chunk per window of every rank's slice (runtime/collectives/scatter_plan.hpp).
//
// Priority (CHORUS_PRIORITY=on): the ops of a batch are planned in priority order (larger
// first, stable), so fusion packs neighbours in that order, and every chunk carries its
// bucket's priority. Chunks wait in runs_before order (protocol.hpp: larger priority, then
// lower sequence), so the rest of a big bucket yields to a later bucket of larger priority at
// the next chunk boundary. On the mailbox lane (every rank on one host) chunks keep priority 0:
// that lane runs them in hand-out order, which must then be the same on every rank; so do
// CUDA buckets, which the device executor launches in plan order (bucket_job::device_order).
//
// Start-order invariant (deadlock freedom, see sender_actor.hpp): chunks are handed to the
// senders in runs_before order of what waits here, while fewer than start_window handed-out
// chunks have not ended (chunk_ended from completion); the chunk that runs before every
// handed-out unfinished one is handed out even past the window. An allgather's or alltoall's
// row chunk is handed out only once every chunk that runs before it (its counts among them)
// has ended here.
//
// Process sets: a bucket of another set than the global one runs among its members
// (bucket_job::members, member-local rank and size; flat algorithms only). A rank outside the
// set plans the same bucket as a bystander, so its sequence numbers match every rank's, and
// hands each of its chunks to completion as ended, unrun.
//
// Autotune: after tunables_pending{c}, batches of cycle c or later wait until the
// tunables_switch for c arrives; then they are planned with its chunk size, fusion and
// in-place thresholds, and chunks go to its number of streams. The same on every rank.
#pragma once

#include "runtime/collectives/mailbox_queue.hpp"
#include "runtime/collectives/hier_schedule.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>

#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "runtime/collectives/compression_policy.hpp"
#include "runtime/config/defaults.hpp"
#include "runtime/fusion/buffer_pool.hpp"
#include "runtime/process_sets/process_set.hpp"
#include "telemetry/observer_slot.hpp"

namespace chorus {

struct fusion_config {
  int rank = 0;
  int size = 1;
  std::size_t fusion_threshold = default_fusion_threshold;
  std::size_t chunk_bytes = default_chunk_bytes;
  std::size_t small_bytes = 64u << 10;  ///< chunks up to this use recursive doubling
  std::size_t in_place_bytes = 0;       ///< allreduce tensors this large skip fusion (0: none)
  std::size_t start_window = 16;
  bool priority = true;  ///< CHORUS_PRIORITY (see above)
  std::size_t pool_bytes = 256u << 20;
  bool pre_touch = true;
  uint64_t first_sequence = uint64_t{1} << 62;
  /// CUDA buckets run as one chunk (NCCL pipelines internally) instead of chunk_bytes chunks
  /// (host staging overlaps copies and network by chunks).
  bool device_whole = false;
  /// CHORUS_HIERARCHICAL and the job's hosts (null: flat algorithms only): host allreduce
  /// chunks run what choose_allreduce (runtime/collectives/hier_schedule.hpp) says, allgather
  /// rows what choose_allgather (hier_allgather.hpp) says.
  hier_mode hierarchical = hier_mode::off;
  std::shared_ptr<const host_groups> hosts;
  /// The job's process sets (null: the global set only): a bucket of another set runs among
  /// its members (bucket_job::members), or, on a rank it leaves out, is planned and skipped.
  std::shared_ptr<const process_set_table> process_sets;
  /// CHORUS_COMPRESSION_SHM (null: every op keeps its compression): a bucket whose ranks all
  /// share memory runs uncompressed (bucket_job::wire); its plan stays that of the asked one.
  std::shared_ptr<const compression_policy> wire_compression;
  /// communicator::pipeline_lane() (null: none): dispatch tells it each direct chunk's turn.
  /// The communicator outlives the pipeline's actors.
  mailbox_queue* direct = nullptr;
  /// The largest chunk that lane takes (mailbox_queue::max_bytes; 0: no lane): the plain
  /// allreduce chunks of the global set up to it run there (chunk_algo::mailbox_allreduce). Only
  /// this number shapes the plan, so a trace's replay, which has no lane, plans alike.
  std::size_t direct_max_bytes = 0;
};

struct fusion_state {
  fusion_config cfg;
  fusion_wiring wired;
  /// wired.observer when it is exactly the session's slot (start_timeline's), else null: with
  /// nothing installed in it, a bucket event would go nowhere and is not built.
  const telemetry::observer_slot* slot = nullptr;
  std::unique_ptr<buffer_pool> pool;
  uint64_t next_sequence = 0;
  uint64_t next_bucket = 1;
  uint64_t next_device_order = 0;
  std::deque<chunk_work> waiting;  ///< planned, not yet handed to a sender (runs_before order)
  std::map<uint64_t, int32_t> handed;  ///< handed out, not ended: sequence → priority
  /// Autotune: cycles whose tunables the autotuner has yet to send (tunables_pending), and
  /// the batches of those cycles or later, held until then (in arrival order).
  std::deque<uint64_t> holds;
  std::deque<batch_agreed> held;
  int active_streams = 0;          ///< senders that get new chunks (0: all)
  uint64_t switches = 0;
  uint64_t buckets = 0;
  uint64_t fused_bytes = 0;
  uint64_t heap_fallbacks = 0;     ///< fused buckets that did not fit the pool
  static inline const char* name = "chorus.fusion";
};

/// Applies an autotuner switch to the plan of later batches. Buckets planned before keep
/// their buffers (leases) and chunk ranges: nothing in flight is resized or freed.
void apply_switch(fusion_state& s, const tunables_switch& sw);

/// The buckets and chunk work for one agreed batch; advances the state's counters.
/// Exposed for tests; the actor calls it and then dispatches.
std::vector<std::pair<std::shared_ptr<bucket_job>, std::vector<chunk_work>>> plan_batch(fusion_state& s,
                                                                                         const batch_agreed& b);

/// What a bucket's chunks run, for metrics and the trace (telemetry::bucket_event::algorithm):
/// "ring", "direct", "hier_sharded", ... joined by '+' when chunks differ; "ring_allgather" or
/// "hier_allgather" (its counts chunk is not counted); empty for other collectives.
std::string algorithm_of(const std::vector<chunk_work>& works);

caf::behavior fusion_actor(caf::stateful_actor<fusion_state>* self, fusion_config cfg);

}  // namespace chorus
