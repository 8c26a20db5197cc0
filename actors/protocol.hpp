// The whole message protocol of the actor pipeline, in one place (docs/design.md, section 2):
//   API ─op_enqueued (ops_enqueued)─▶ producer ─tensor_ready─▶ negotiator ◀─gossip_bytes─▶ peers
//   negotiator ─batch_agreed─▶ fusion ─bucket_planned─▶ completion, ─chunk_work─▶ senders
//   runner ─chunk_ran─▶ sender ─chunk_done─▶ completion ─chunk_ended─▶ fusion
//   completion / negotiator ─op_finished (completion: ops_finished, a bucket's)─▶ producer ─▶ the op's done callback
//   API ─join_enqueued─▶ producer ─join_atom─▶ negotiator ─join_finished─▶ producer (Horovod's join)
//   autotune on: completion ─bucket_finished─▶ autotuner ─window_scored─▶ negotiator (gossip
//     agrees the window) ─window_agreed─▶ autotuner, and ─tunables_pending─▶ fusion;
//     autotuner ─tunables_switch─▶ fusion, negotiator, senders (actors/autotuner_actor.hpp)
//   between ranks: negotiator ─frame on the control link─▶ peer's control edge
//     ─gossip_bytes / gone_atom / leaving_atom / left_atom─▶ its negotiator
//     (actors/control_edge.hpp; no actor message crosses processes)
// Every type has an inspect() (so all can be registered and printed); fields that are
// pointers, buffers or callbacks are left out of it, because the messages holding them never
// leave the rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/stats.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/status.hpp"
#include "runtime/fusion/buffer_pool.hpp"
#include "runtime/fusion/fusion_plan.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "telemetry/observer.hpp"

namespace chorus {

class stream_board;  // runtime/collectives/stream_board.hpp
class nonfinite_report;  // runtime/collectives/wire_ring_op.hpp

struct op_request;  // actors/op_request.hpp

using steady_time = std::chrono::steady_clock::time_point;

// ---- atoms (commands) ----
using tick_atom = caf::atom_constant<caf::atom("tick")>;          ///< negotiator: the strategy's timer fired
using stop_atom = caf::atom_constant<caf::atom("stop")>;          ///< negotiator: fail what is pending, accept nothing new
using drain_atom = caf::atom_constant<caf::atom("drain")>;        ///< producer: reply once every op ended (or the grace passed)
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;  ///< producer: the drain grace is over
using stats_atom = caf::atom_constant<caf::atom("stats")>;        ///< negotiator, sender: reply with counters
using gone_atom = caf::atom_constant<caf::atom("peergone")>;      ///< negotiator: (why) end what is pending with this; from a peer: (origin rank, why) it lost that rank
using leaving_atom = caf::atom_constant<caf::atom("leaving")>;    ///< negotiator ← edge: (rank, cycles) that rank leaves after finishing this many cycles
using left_atom = caf::atom_constant<caf::atom("peerleft")>;      ///< negotiator ← edge: (rank, why) that rank said goodbye (actors/departures.hpp)
using join_atom = caf::atom_constant<caf::atom("join")>;          ///< negotiator ← producer: this rank joins (Horovod's join)
using hand_atom = caf::atom_constant<caf::atom("handover")>;      ///< negotiator → itself: hand the strategy the ops that arrived since the last one

// ---- values carried by messages ----

/// One enqueued operation as the actors see it (the callback stays with the producer).
struct op_ref {
  uint64_t handle = 0;       ///< the producer's key
  tensor_spec spec;          ///< as negotiated: for allgather and alltoall shape[0] is 0 (ranks may differ)
  int64_t first_dim = 0;     ///< allgather, alltoall: this rank's real dim 0
  std::vector<int64_t> splits;  ///< alltoall: rows of dim 0 this rank sends to each rank, in rank order
  /// Join: a joined rank's stand-in for an op it never enqueued (handle 0, ended silently):
  /// the neutral data it contributes; input and output point into it.
  std::shared_ptr<std::vector<std::byte>> filler;
  const void* input = nullptr;
  void* output = nullptr;
  steady_time enqueued_at{};
  /// CUDA tensors (spec.device cuda): the device, and the event recorded on the caller's
  /// stream at submit (runtime/device/gpu.hpp: record_ready) that Chorus waits for first.
  int device_index = 0;
  std::shared_ptr<void> ready;
};

/// How a sender runs one chunk; fusion chooses it, identically on every rank.
enum class chunk_algo : uint8_t {
  ring_allreduce,    ///< make_ring_allreduce, chunks above the small-allreduce size
  exchange_allreduce,///< exchange_op (recursive doubling), chunks up to the small-allreduce size
  broadcast,         ///< broadcast_op
  allgather_counts,  ///< ring allgather of one i64 per rank: every rank's dim 0
  allgather_data,    ///< ring allgather of the rows; starts only after its counts chunk ended
  reducescatter,     ///< make_ring_reducescatter over one window of every rank's slice (chunk_ranges)
  alltoall_counts,   ///< ring allgather of every rank's splits (size i64 each): the size x size matrix
  alltoall_data,     ///< alltoall_op of the rows; starts only after its counts chunk ended
  hier_sharded,      ///< hier_op, sharded variant (runtime/collectives/hier_schedule.hpp)
  hier_leader,       ///< hier_op, leader variant
  hier_allgather,    ///< allgather_data by hier_op over hier_allgather.hpp's steps (same start rule)
  mailbox_allreduce,  ///< every rank on one host: the communicator's mailbox_queue, in hand-out order
};

/// One bucket in flight: the plan, its ops, the buffer the collective runs on. Shared by
/// fusion (creates), the chunk work (keeps it alive while the data plane uses it) and
/// completion (unpacks and reports). The data plane writes `data` / the allgather fields;
/// the message chain chunk_ran → chunk_done orders those writes before any read.
struct bucket_job {
  uint64_t id = 0;
  bucket plan;                      ///< member ids are indexes into `ops`
  std::vector<op_ref> ops;          ///< members, in plan order
  uint64_t first_sequence = 0;
  uint32_t chunks = 0;              ///< sequences [first_sequence, first_sequence + chunks)
  buffer_lease lease;               ///< fused buffer from the pool (empty when in place)
  std::vector<std::byte> heap;      ///< fallback buffer when the pool is exhausted
  std::byte* data = nullptr;        ///< where the collective runs
  /// (offset, bytes) of every chunk, by sequence - first_sequence (fused buckets are packed
  /// and unpacked chunk by chunk).
  std::vector<std::pair<std::size_t, std::size_t>> chunk_ranges;
  bool fused() const { return plan.kind == fusable_kind::allreduce && !plan.in_place; }
  /// Fused, yet every chunk runs on the direct path over the members' own outputs (an
  /// out-of-place op's input is copied there first): the mailboxes gather from them and fold
  /// into them, so the bucket takes no buffer and is never packed or unpacked
  /// (copy_inputs, member_regions: bucket_ranges.hpp).
  bool scattered = false;
  // allgather and alltoall only (reducescatter: row_bytes; its chunk_ranges are windows of
  // every rank's slice, runtime/collectives/scatter_plan.hpp)
  std::size_t row_bytes = 0;        ///< bytes of one row (product of dims 1.., times element size)
  /// Filled by the counts chunk: allgather, one dim 0 per rank; alltoall, every rank's splits
  /// (row r: what rank r sends to each rank), size x size.
  std::vector<int64_t> first_dims;
  std::vector<std::byte> gathered;  ///< filled when the data chunk starts, then by the ring / alltoall
  /// CUDA buckets (one in-place tensor each): their number among this rank's CUDA buckets, in
  /// plan order (the same on every rank: NCCL launches in this order), and the pinned host
  /// copy the host-staging path moves (set by the device runner).
  uint64_t device_order = 0;
  std::shared_ptr<std::byte> staging;
  bool on_device() const { return !ops.empty() && ops.front().spec.device == device_kind::cuda; }
  status local_error;               ///< this rank could not prepare the bucket (pack, counts chunk failed)
  /// NaN/Inf check on: the ranks whose input held NaN/Inf, agreed by every chunk's ring.
  std::shared_ptr<nonfinite_report> nonfinite;
  /// What the chunks put on the wire: the ops' compression, or none where the compression policy dropped it
  /// (CHORUS_COMPRESSION_SHM: all members share memory). The plan (fusion key, chunks) follows
  /// the asked one, identical on every rank and in a trace's replay.
  compression wire = compression::none;
  uint64_t cycle = 0;               ///< the agreed batch it came from (the autotuner's windows count cycles)
  /// Where the collective runs: its process set's members (job ranks, ascending; null for the
  /// global set), this rank among them and their number (the job's rank and size for the
  /// global set). Allgather and alltoall gather, and reducescatter splits, among the members.
  std::shared_ptr<const std::vector<int>> members;
  int group_rank = 0;
  int group_size = 1;
  /// The bucket's process set leaves this rank out: planned only so that the sequence numbers
  /// match on every rank; its chunks end here at once, unrun, and its ops are stand-ins.
  bool bystander = false;
};

/// One chunk of a bucket for a sender: what to run, where, and its global sequence number.
struct chunk_work {
  uint64_t sequence = 0;
  chunk_algo algo = chunk_algo::ring_allreduce;
  std::byte* data = nullptr;  ///< start of the chunk, set when fusion hands it out (allgather: unused)
  std::size_t bytes = 0;
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;
  int root = 0;
  std::shared_ptr<bucket_job> job;
  steady_time started{};  ///< set by the sender that starts it (telemetry)
  /// Its bucket's priority (the largest of its members'; 0 with CHORUS_PRIORITY=off, on the
  /// mailbox lane and for CUDA buckets): with the sequence, the order in which chunks are handed out and started,
  /// the same on every rank (runs_before).
  int32_t priority = 0;
};

/// The order of chunks on every rank: larger priority first, then lower sequence. A total
/// order, the same on every rank (fusion_actor.hpp, sender_actor.hpp: deadlock freedom).
inline bool runs_before(int32_t pa, uint64_t sa, int32_t pb, uint64_t sb) {
  return pa != pb ? pa > pb : sa < sb;
}
inline bool runs_before(const chunk_work& a, const chunk_work& b) {
  return runs_before(a.priority, a.sequence, b.priority, b.sequence);
}

// stream_stats and negotiation_stats (the replies to stats_atom) live in actors/stats.hpp,
// so that the public pipeline.hpp needs no CAF header.

// ---- messages ----

/// API → producer: a new operation (the request owns the callback).
struct op_enqueued { std::shared_ptr<op_request> request; steady_time at{}; };
/// API → producer: operations submitted together (pipeline::enqueue_all), admitted in order.
/// The negotiator reads their tensor_ready back to back, so they share a cycle.
struct ops_enqueued { std::vector<std::shared_ptr<op_request>> requests; steady_time at{}; };
/// producer → negotiator: a local operation is ready to be negotiated.
struct tensor_ready { op_ref op; };
/// control edge → negotiator (in-process jobs: negotiator ↔ negotiator): one encoded
/// negotiation::gossip_message from a peer.
struct gossip_bytes { std::vector<uint8_t> data; };
/// What a control message between negotiators carries (the kind byte of a control link frame;
/// 2 is sent by no rank: the control edge loses a peer that sends it, as any unknown kind).
enum class control_kind : uint8_t {
  gossip = 1,  ///< `data`: one encoded negotiation::gossip_message
  gone = 3,    ///< the sender lost rank `origin` (-1: unknown); `data`: why, as text
  leaving = 4, ///< the sender shuts down; `data`: the negotiation cycles it finished (leaving_data)
};
/// control_kind::leaving's data: a cycle count, 8 bytes little-endian.
inline std::vector<uint8_t> leaving_data(uint64_t cycles) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<uint8_t>(cycles >> (8 * i));
  return out;
}
/// The cycle count in control_kind::leaving's data; nothing when it is not 8 bytes.
inline std::optional<uint64_t> leaving_cycles(const std::vector<uint8_t>& data) {
  if (data.size() != 8) return std::nullopt;
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | data[static_cast<std::size_t>(i)];
  return v;
}
/// in-process jobs → negotiator: every rank's negotiator, by rank (own slot unused); monitored.
/// (The pipeline's negotiator reaches its peers through the control link instead.)
struct peers_connected { std::vector<caf::actor> peers; };
/// negotiator → fusion: ops agreed ready on every rank, in the agreed order.
struct batch_agreed { uint64_t cycle = 0; std::vector<op_ref> ops; };
/// negotiator, completion → producer: an op ended; the producer calls its done once.
struct op_finished {
  uint64_t handle = 0;
  status result;
  std::vector<std::byte> gathered;  ///< allgather, alltoall: the rows received, in rank order
  /// allgather: each rank's dim 0; alltoall: rows received from each rank; allreduce and
  /// reducescatter with CHORUS_NAN_CHECK=skip: the ranks whose input held NaN/Inf (agreed).
  std::vector<int64_t> first_dims;
};
/// completion → producer: the ops of one bucket ended, in plan order: one message for all of
/// them (a step's last bucket may hold a hundred tensors).
struct ops_finished { std::vector<op_finished> ops; };
/// API → producer: this rank joins; `done` gets the outcome and the last rank to join.
struct join_enqueued { std::function<void(const status&, int last_rank)> done; };
/// negotiator → producer: every rank has joined (ok, with the last one), or joining failed.
struct join_finished { status result; int last_rank = -1; };
/// fusion → completion: a bucket and its chunk sequences, before any of its chunks runs.
struct bucket_planned { std::shared_ptr<bucket_job> job; };
/// completion → fusion: chunk `sequence` has ended on this rank (it leaves the start window).
struct chunk_ended { uint64_t sequence = 0; };
/// data plane (I/O thread) → sender: a chunk op ended.
struct chunk_ran { uint64_t sequence = 0; status result; };
/// sender → completion: a chunk ended (on stream `stream`).
struct chunk_done { uint64_t sequence = 0; uint64_t bucket = 0; int stream = 0; status result; };
/// completion → autotuner: a bucket of `bytes` from the batch of `cycle` ended at `at`.
/// `tensors`: the ids of its members' names (tuning::tensor_id), by which the autotuner counts
/// training steps; local only (not in the trace).
struct bucket_finished { uint64_t cycle = 0; std::size_t bytes = 0; steady_time at{}; std::vector<uint64_t> tensors; };
/// autotuner → negotiator: this rank's score (bytes per second) of its next window, and the
/// digest of its tuner's state; the gossip agrees the window (negotiation::agreed_window).
struct window_scored { double score = 0; uint64_t digest = 0; };
/// negotiator → autotuner: a window agreed at the end of `cycle`, with the job's score (the
/// minimum over ranks); the same on every rank.
struct window_agreed { uint64_t cycle = 0; uint64_t window = 0; double score = 0; };
/// negotiator → fusion: a window was agreed at the end of cycle - 1; batches of `cycle` and
/// later wait for the autotuner's tunables_switch for `cycle` (sent before any such batch).
struct tunables_pending { uint64_t cycle = 0; };
/// autotuner → fusion (after every agreed window, changed or not), negotiator and senders
/// (when changed): the tunables in force for the batches of `cycle` and later, identical on
/// every rank. Buckets planned before keep their buffers and chunk plans.
struct tunables_switch {
  uint64_t cycle = 0;
  int streams = 1;
  uint64_t chunk_bytes = 0;
  uint64_t fusion_threshold = 0;
  uint64_t in_place_bytes = 0;
  int64_t cycle_time_us = 0;
};
/// pipeline → autotuner (pipeline::hold_autotune / resume_autotune, at a quiescent point on every
/// rank alike): held, it scores no window and follows set_tunables; resumed, it scores again,
/// and with `restart` its search starts over from the tunables in force. A hold is answered
/// with autotune_windows (how many windows this rank submitted); resume with itself.
struct autotune_hold {
  bool held = true;
  bool restart = false;
};
/// autotuner → pipeline: windows this rank submitted so far (answer to a hold).
struct autotune_windows {
  uint64_t submitted = 0;
};
/// pipeline → autotuner, second step of a hold: submit empty windows (score +inf, the minimum's
/// neutral element) up to `to`, the most any rank submitted, so that every rank's windows are
/// agreed; answered (with autotune_windows) once they are, and the autotuner is held.
struct autotune_pad {
  uint64_t to = 0;
};
// pipeline → each actor of the rank, right after spawning: the actors it sends to and where it
// reports (`observer`: the rank's telemetry, null when off), and nothing else. `autotuner` is
// invalid unless CHORUS_AUTOTUNE=1; `senders` are by stream; `board` places chunks by stream
// speed (null: round-robin).
struct producer_wiring {
  caf::actor negotiator;
  std::shared_ptr<telemetry::observer> observer;
};
struct negotiator_wiring {
  caf::actor producer;
  caf::actor fusion;
  caf::actor autotuner;
  std::shared_ptr<telemetry::observer> observer;
};
struct fusion_wiring {
  caf::actor completion;
  std::vector<caf::actor> senders;
  std::shared_ptr<telemetry::observer> observer;
  std::shared_ptr<stream_board> board;
};
struct sender_wiring {
  caf::actor completion;
  std::vector<caf::actor> senders;  ///< its siblings too: work stealing
  std::shared_ptr<telemetry::observer> observer;
  std::shared_ptr<stream_board> board;
};
struct completion_wiring {
  caf::actor producer;
  caf::actor fusion;
  caf::actor autotuner;
  std::shared_ptr<telemetry::observer> observer;
};
struct autotuner_wiring {
  caf::actor negotiator;
  caf::actor fusion;
  std::vector<caf::actor> senders;
  std::shared_ptr<telemetry::observer> observer;
};

/// The wired observer, or one that ignores everything when telemetry is off.
telemetry::observer& observer_of(const std::shared_ptr<telemetry::observer>& wired);
/// idle sender → every sibling: how many chunks wait in your deque?
struct steal_request { int thief = 0; uint64_t round = 0; };
/// sibling → idle sender: the answer to steal_request.
struct steal_offer { int victim = 0; uint64_t round = 0; std::size_t queued = 0; };
/// idle sender → fullest sibling: give me the tail of your deque.
struct steal_take { int thief = 0; uint64_t round = 0; };
/// victim → thief: the stolen chunk, or none when the deque emptied meanwhile.
struct steal_reply { int victim = 0; uint64_t round = 0; std::optional<chunk_work> chunk; };

// ---- inspect: what CAF may serialize. Pointers, buffers, callbacks and steady times are
// left out on purpose: no actor message leaves the rank (the control link carries gossip as
// bytes), and the rest is what a trace of the protocol would show.

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status& x) {
  auto code = static_cast<int32_t>(x.code());
  std::string message = x.message();
  return f(caf::meta::type_name("status"), code, message, caf::meta::load_callback([&]() -> caf::error {
             x = status{static_cast<errc>(code), message};
             return caf::none;
           }));
}

// CAF's inspect() of a message type: its name and its fields (x is the message), in order.
#define CHORUS_MESSAGE_FIELDS(type, ...)                                   \
  template <class Inspector>                                               \
  typename Inspector::result_type inspect(Inspector& f, type& x) {         \
    return f(caf::meta::type_name(#type), __VA_ARGS__);                    \
  }

CHORUS_MESSAGE_FIELDS(tensor_spec, x.name, x.kind, x.type, x.shape, x.op, x.root, x.device,
                      x.process_set, x.transient, x.priority)
CHORUS_MESSAGE_FIELDS(op_ref, x.handle, x.spec, x.first_dim, x.splits)
CHORUS_MESSAGE_FIELDS(chunk_work, x.sequence, x.algo, x.bytes, x.type, x.op, x.root, x.priority)
CHORUS_MESSAGE_FIELDS(stream_stats, x.stream, x.chunks, x.bytes, x.busy_us, x.stolen, x.given,
                      x.max_in_flight)
CHORUS_MESSAGE_FIELDS(negotiation_stats, x.cycles, x.messages_sent, x.messages_received,
                      x.agreed_ops, x.p50_us, x.p99_us, x.samples)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, op_enqueued&) {
  return f(caf::meta::type_name("op_enqueued"));  // the request and its callback stay local
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ops_enqueued&) {
  return f(caf::meta::type_name("ops_enqueued"));  // as op_enqueued
}
CHORUS_MESSAGE_FIELDS(tensor_ready, x.op)
CHORUS_MESSAGE_FIELDS(gossip_bytes, x.data)
CHORUS_MESSAGE_FIELDS(peers_connected, x.peers)
CHORUS_MESSAGE_FIELDS(batch_agreed, x.cycle, x.ops)
CHORUS_MESSAGE_FIELDS(op_finished, x.handle, x.result, x.first_dims)
CHORUS_MESSAGE_FIELDS(ops_finished, x.ops)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_enqueued&) {
  return f(caf::meta::type_name("join_enqueued"));  // the callback stays local
}
CHORUS_MESSAGE_FIELDS(join_finished, x.result, x.last_rank)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bucket_planned& x) {
  uint64_t id = x.job ? x.job->id : 0, first = x.job ? x.job->first_sequence : 0;
  uint32_t chunks = x.job ? x.job->chunks : 0;
  return f(caf::meta::type_name("bucket_planned"), id, first, chunks);
}
CHORUS_MESSAGE_FIELDS(chunk_ended, x.sequence)
CHORUS_MESSAGE_FIELDS(chunk_ran, x.sequence, x.result)
CHORUS_MESSAGE_FIELDS(chunk_done, x.sequence, x.bucket, x.stream, x.result)
CHORUS_MESSAGE_FIELDS(producer_wiring, x.negotiator)
CHORUS_MESSAGE_FIELDS(negotiator_wiring, x.producer, x.fusion, x.autotuner)
CHORUS_MESSAGE_FIELDS(fusion_wiring, x.completion, x.senders)
CHORUS_MESSAGE_FIELDS(sender_wiring, x.completion, x.senders)
CHORUS_MESSAGE_FIELDS(completion_wiring, x.producer, x.fusion, x.autotuner)
CHORUS_MESSAGE_FIELDS(autotuner_wiring, x.negotiator, x.fusion, x.senders)
CHORUS_MESSAGE_FIELDS(bucket_finished, x.cycle, x.bytes)
CHORUS_MESSAGE_FIELDS(window_scored, x.score, x.digest)
CHORUS_MESSAGE_FIELDS(window_agreed, x.cycle, x.window, x.score)
CHORUS_MESSAGE_FIELDS(autotune_hold, x.held, x.restart)
CHORUS_MESSAGE_FIELDS(autotune_windows, x.submitted)
CHORUS_MESSAGE_FIELDS(autotune_pad, x.to)
CHORUS_MESSAGE_FIELDS(tunables_pending, x.cycle)
CHORUS_MESSAGE_FIELDS(tunables_switch, x.cycle, x.streams, x.chunk_bytes, x.fusion_threshold,
                      x.in_place_bytes, x.cycle_time_us)
CHORUS_MESSAGE_FIELDS(steal_request, x.thief, x.round)
CHORUS_MESSAGE_FIELDS(steal_offer, x.victim, x.round, x.queued)
CHORUS_MESSAGE_FIELDS(steal_take, x.thief, x.round)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, steal_reply& x) {
  uint64_t sequence = x.chunk ? x.chunk->sequence : 0;
  return f(caf::meta::type_name("steal_reply"), x.victim, x.round, sequence);
}
#undef CHORUS_MESSAGE_FIELDS

/// Registers every type above with `cfg`; call in every process before the system starts.
void register_types(caf::actor_system_config& cfg);

}  // namespace chorus

