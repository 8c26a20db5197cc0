// The C++ embedding API: what a framework op calls to hand a gradient to Chorus. init() boots
// the job (communicator, then the actor pipeline); the *_async calls describe a caller-owned
// buffer and return at once with a handle, or call a callback once the operation ended.
//
// Thread-safety: every function here may be called from any thread at any time. Two rules:
//  * names must be unique among this rank's pending operations (reuse a name once its
//    operation ended, e.g. every training step);
//  * init(), shutdown() and a blocking handle::wait() must not be called from a completion
//    callback (they would wait for the thread that runs it); such a call fails with
//    errc::invalid_argument / does nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chorus/status.hpp"
#include "chorus/types.hpp"

namespace chorus {

namespace detail {
struct op_state;
}

/// The name of an operation (implicitly from a string), and whether the caller uses it once.
/// A name that comes back (a gradient's name, every step) stays registered and travels between
/// the ranks as one bit per negotiation message. A name used once and never again (a fresh
/// name per call, as chorus.torch's "allreduce.noname.<handle>") should say so with
/// transient(name): its negotiated id is freed on every rank as soon as the operation is
/// agreed, so one-shot names do not grow every negotiation message without bound. Every rank
/// must mark the operation alike (a difference is a mismatch error naming the tensor and the
/// ranks). Enqueued again anyway, a transient name is simply negotiated anew.
/// `process_set` picks the process set the operation runs in (see add_process_set): 0, the
/// global set, by default; in_process_set(name, id) sets it. Each set has names of its own.
/// `priority` orders waiting work (CHORUS_PRIORITY=on): a larger one goes first, and the
/// remaining chunks of a big bucket yield to a later, larger one's. Give the first layers'
/// gradients the largest (chorus.torch does: their place in the forward pass). Every rank must
/// give a name the same priority (a difference is a mismatch error, "priority"); 0 by default.
struct op_name {
  std::string name;
  bool transient = false;
  int process_set = 0;
  int32_t priority = 0;
  op_name(std::string n, bool once = false, int set = 0)  // NOLINT: implicit
      : name(std::move(n)), transient(once), process_set(set) {}
  op_name(const char* n) : name(n ? n : "") {}  // NOLINT: implicit; null is an empty name (refused at enqueue)
};
/// op_name{name, true}: a name this rank enqueues once (see op_name).
inline op_name transient(std::string name) { return op_name(std::move(name), true); }
/// `name` in process set `id` (its id from init's list or add_process_set).
inline op_name in_process_set(op_name name, int id) {
  name.process_set = id;
  return name;
}

/// `name` with priority `p` (see op_name).
inline op_name with_priority(op_name name, int32_t p) {
  name.priority = p;
  return name;
}

/// "Wait without a deadline", for handle::wait().
inline constexpr std::chrono::milliseconds forever = std::chrono::milliseconds::max();

/// Starts this process' part of the job: reads rank, size and the rendezvous address from the
/// environment (CHORUS_*, torchrun, Open MPI, PMI, Slurm; none: a job of one rank), reads the
/// pipeline settings (CHORUS_CYCLE_TIME_MS, CHORUS_FUSION_THRESHOLD, ... and their HOROVOD_*
/// aliases), connects to the other ranks and starts the actor pipeline. Blocks until every
/// rank arrived or the rendezvous timeout passed. Idempotent: a second call while initialized
/// returns ok. After shutdown(), init() starts a new job.
status init();

/// init() with Horovod's static process sets (hvd.init(process_sets=[...])): each entry is a
/// list of job ranks (any order, no duplicates); they get ids 1, 2, ... in list order (0 is
/// the global set; a repeated set, or one of every rank, keeps the id it has, as in Horovod). Every rank must pass the same lists in the same order (checked: a
/// difference fails init on every rank with errc::invalid_argument). Called while
/// initialized: ok only when the lists equal those in force.
status init(const std::vector<std::vector<int>>& process_sets);

/// Process sets (Horovod's). An operation named in_process_set(name, id) runs among the
/// set's members only: it is negotiated, fused and reduced among them, concurrently with
/// other sets' operations; average divides by the set's size; allgather and alltoall order
/// rows by the members' job ranks, and alltoall's splits count one entry per member; a
/// broadcast root is a job rank that must be a member. A rank outside the set that submits
/// one gets errc::invalid_argument ("rank 2 is not a member of the provided process set").
/// Sets other than the global one run CPU tensors only.
///
/// Registers a set after init: needs CHORUS_DYNAMIC_PROCESS_SETS=1 (alias
/// HOROVOD_DYNAMIC_PROCESS_SETS). Collective: every rank of the job calls it with the same
/// ranks, in the same order relative to other add/remove calls; returns the new id (a freed
/// id is used again), the same on every rank. A set of the same ranks already registered:
/// errc::invalid_argument; ranks that passed different lists: errc::mismatch on every rank.
result<int> add_process_set(std::vector<int> ranks);
/// Removes set `id` (collective, as add_process_set; CHORUS_DYNAMIC_PROCESS_SETS=1). The
/// global set and unknown ids: errc::invalid_argument. Its operations must have ended.
status remove_process_set(int id);
/// The ids of every registered set, ascending (0 first). Empty when not initialized.
std::vector<int> process_set_ids();
/// The job ranks of set `id`, ascending; errc::invalid_argument for an unknown id.
result<std::vector<int>> process_set_ranks(int id);
/// This rank among set `id`'s members (0-based); errc::invalid_argument when the set is
/// unknown or leaves this rank out.
result<int> process_set_rank(int id);
/// Number of ranks in set `id`; errc::invalid_argument for an unknown id.
result<int> process_set_size(int id);

/// Returns once every rank of process set `process_set` (0: the job) called barrier() with
/// it. Blocking; not from a completion callback. A rank outside the set gets the error above.
status barrier(int process_set = 0);

/// Stops the pipeline and closes the connections. Every operation still pending ends with
/// errc::shutdown (its callback runs, its handle completes) before shutdown() returns.
/// Idempotent; a no-op when not initialized. Also runs at process exit.
void shutdown();

/// True between a successful init() and shutdown().
bool is_initialized();

/// This process' rank in [0, size()); -1 when not initialized.
int rank();
/// Number of ranks in the job; -1 when not initialized.
int size();
/// This process' rank among the ranks on its host; -1 when not initialized.
int local_rank();
/// Number of ranks of this job on this host; -1 when not initialized.
int local_size();

/// Elastic jobs (chorusrun --min-np/--max-np): the round of the job this process is in; -1 when
/// not initialized or not elastic. After a failure, shutdown() and init() join the launcher's
/// next round (new rank and size).
int64_t elastic_round();
/// The newest round the launcher formed: greater than elastic_round() when workers were added or
/// lost since this round began. -1 outside an elastic job; errc::rendezvous when the launcher's
/// store cannot be reached.
result<int64_t> elastic_latest_round();

/// Horovod's timeline: starts recording this rank's operations (each tensor's negotiation,
/// queue and collective phases, negotiation cycles, fusion buckets, chunks per stream) for a
/// Chrome-trace JSON file at `path` (chrome://tracing, ui.perfetto.dev), written by
/// stop_timeline(). `mark_cycles` adds a CYCLE_START instant per negotiation cycle. As in
/// Horovod only rank 0 records and writes the file; on other ranks both calls do nothing and
/// return ok. `path` is created (empty) at once; a path that cannot be created is
/// errc::config naming it. A second call while recording writes the first timeline and starts
/// a new one at the new path. Independent of CHORUS_TRACE (its recorder keeps recording).
/// Not initialized: errc::invalid_argument.
status start_timeline(const std::string& path, bool mark_cycles = false);

/// Stops the timeline and writes it (Chrome-trace JSON) to start_timeline's path; waits for
/// the writing. A no-op returning ok when no timeline runs. shutdown() also writes a
/// timeline still running.
status stop_timeline();

/// The settings in force on this rank: set by the CHORUS_* variables, moved by the autotuner
/// (CHORUS_AUTOTUNE=1), which switches every rank alike at an agreed cycle. A framework's own
/// bucket size (chorus.torch's CHORUS_BUCKET_BYTES) may follow fusion_threshold; it must then
/// change at the same step on every rank (read it on one rank and broadcast it).
struct settings_in_force {
  std::size_t fusion_threshold = 0;
  std::size_t chunk_bytes = 0;
  int streams = 0;                  ///< streams (connections per peer) that carry chunks
  double cycle_time_ms = 0;
  std::size_t in_place_bytes = 0;
};
/// Not initialized: errc::invalid_argument.
result<settings_in_force> settings();

/// A caller-owned buffer: Chorus reads it (and, for allreduce and broadcast, writes the result
/// into it; a reducescatter `out` view is only written) without copying it when none is needed. The buffer must stay alive and untouched
/// until the operation ended.
struct tensor_view {
  void* data = nullptr;                   ///< first element; may be null only when it has none
  dtype type = dtype::f32;                ///< element type
  std::vector<int64_t> shape;             ///< dimensions, outermost first; empty = one element
  device_kind device = device_kind::cpu;  ///< where `data` lives: host memory, or a CUDA device
  /// CUDA: the device `data` is on (checked at submit).
  int device_index = 0;
  /// CUDA: the stream (a cudaStream_t) whose queued work produces `data`. At submit Chorus
  /// records an event there and starts reading only after it, without blocking the caller;
  /// null is the legacy default stream. The result is complete when the handle is done.
  void* stream = nullptr;
};

/// The outcome of one submitted operation. Copies share the same state. An operation always
/// ends exactly once: done, or done with an error.
class handle {
 public:
  /// An empty handle: done, with errc::invalid_argument ("empty handle").
  handle();
  explicit handle(std::shared_ptr<detail::op_state> state);

  /// True once the operation ended (successfully or not). Never blocks.
  bool poll() const;

  /// Waits until the operation ended, or `timeout` passed; returns result() in the first
  /// case and errc::timeout in the second (the operation continues; wait again or poll).
  /// A negative timeout polls. Inside a completion callback only a poll is allowed: a wait
  /// that may block returns errc::invalid_argument at once (it would block the thread that
  /// completes operations).
  status wait(std::chrono::milliseconds timeout = forever) const;

  /// How the operation ended; before it ended, errc::timeout "... is still pending".
  const status& result() const;

  /// The name of the tensor, as given to *_async.
  const std::string& name() const;

  /// Once done, the result rows (empty otherwise, and for allreduce and broadcast):
  ///  * allgather: the rows of every rank, in rank order;
  ///  * alltoall: the rows this rank received, in rank order;
  ///  * reducescatter (the form without `out`): this rank's slice of the reduced tensor.
  /// The bytes stay at one address for as long as any copy of this handle lives, so a binding
  /// can hand them out without a copy (e.g. torch::from_blob(gathered_data(), shape(), deleter
  /// that keeps a copy of the handle)).
  const std::vector<std::byte>& gathered() const;
  /// gathered().data() as a writable pointer (null when empty): nothing writes the bytes after
  /// the operation ended, so the caller may take them over in place.
  std::byte* gathered_data() const;
  /// Once done, the shape of the result rows (empty otherwise, and for allreduce/broadcast):
  /// allgather, the sum of the ranks' first dimensions; alltoall, the rows received;
  /// reducescatter, this rank's rows (reducescatter_rows); then the input's other dimensions.
  std::vector<int64_t> shape() const;
  /// Allgather only, once done: each rank's first dimension, in rank order.
  const std::vector<int64_t>& first_dims() const;
  /// Alltoall only, once done: how many rows came from each rank, in rank order (Horovod's
  /// received_splits).
  const std::vector<int64_t>& received_splits() const;
  /// Join only, once done successfully: the last rank to join; -1 otherwise.
  int last_rank() const;
  /// Allreduce and reducescatter with the NaN/Inf check in `skip` mode, once done: the ranks
  /// whose input held NaN or Inf, ascending (empty: all finite). Every rank gets the same list,
  /// so every rank can skip the same training step.
  std::vector<int> nonfinite_ranks() const;

 private:
  std::shared_ptr<detail::op_state> s_;
};

/// Completion callback of allreduce and broadcast. Runs exactly once, on a Chorus thread (or,
/// for an argument rejected at the call, on the calling thread before the call returns).
/// Keep it short: it runs where other operations are completed. Chorus threads run under
/// SCHED_BATCH unless CHORUS_SCHEDULER_BATCH=0, and a thread the callback starts inherits it.
using done_callback = std::function<void(const status&)>;
/// Completion callback of allgather (and reducescatter): the status, the rows and their shape.
using gather_callback =
    std::function<void(const status&, const std::vector<std::byte>& gathered, const std::vector<int64_t>& shape)>;

/// Reduces `v` across all ranks, in place (the result replaces the input on every rank).
/// average divides the sum by size(); integer types divide with truncation.
/// Bad arguments (empty name, null data, negative dimension, not initialized, a name already
/// pending) give a handle that already ended with errc::invalid_argument naming the tensor.
/// Per-operation wire options of allreduce, reducescatter and allgather; unset fields take
/// the job's defaults (CHORUS_COMPRESSION, CHORUS_NAN_CHECK), which apply only where they can
/// (compression: f32/f64 CPU tensors, and sum or average; the check: float CPU tensors).
/// Asked for explicitly where it cannot apply (compression of an integer tensor, of a min),
/// the operation ends at once with errc::invalid_argument naming the tensor.
///  * compression fp16/bf16: each segment is cast as it is sent, sums are taken in f32, the
///    result is a value of the wire type cast back (the same bits on every rank); `prescale`
///    multiplies the input (in f32) before the sum, to keep an fp16 sum below 65504.
///  * nan check error / skip: see nan_check (runtime/compression/options.hpp) and
///    handle::nonfinite_ranks.
struct op_options {
  std::optional<compression> wire;
  std::optional<nan_check> check;
  float prescale = 1.0f;  ///< compressed allreduce and reducescatter only (else must be 1)
};

handle allreduce_async(const op_name& name, tensor_view v, reduce_op op = reduce_op::average);
/// The same with wire options.
handle allreduce_async(const op_name& name, tensor_view v, reduce_op op, const op_options& opts);

/// Several allreduces submitted as one call: they reach the runtime in one message, so tensors
/// ready at the same moment (a layer's weight and bias) share a negotiation cycle and, when
/// small, a fused buffer. Each is still its own operation (own name, own handle, returned in
/// order) and ends on its own: one rejected at the call ends with its error, the others go on.
/// `names` and `views` must have the same length (otherwise every handle ends with
/// errc::invalid_argument).
std::vector<handle> allreduce_async(const std::vector<op_name>& names, const std::vector<tensor_view>& views,
                                    reduce_op op = reduce_op::average);
/// The same with wire options (for every tensor of the call).
std::vector<handle> allreduce_async(const std::vector<op_name>& names, const std::vector<tensor_view>& views,
                                    reduce_op op, const op_options& opts);

/// Copies rank `root`'s `v` into `v` on every other rank, in place. `root` must be in
/// [0, size()).
handle broadcast_async(const op_name& name, tensor_view v, int root);

/// Concatenates every rank's `v` along the first dimension (which may differ between ranks;
/// the other dimensions must agree). `v` is only read; the result is handle::gathered().
/// `v` needs at least one dimension.
handle allgather_async(const op_name& name, tensor_view v);
/// The same with wire options (compression: every rank's rows cast to the wire type and back).
handle allgather_async(const op_name& name, tensor_view v, const op_options& opts);

/// Rows of dim 0 that rank `r` of `size` ranks gets from a reducescatter of `dim0` rows
/// (Horovod's split: dim0 / size, plus one for each of the first dim0 % size ranks). Rank r's
/// rows start at row sum of reducescatter_rows(dim0, size, q) for q < r.
int64_t reducescatter_rows(int64_t dim0, int size, int r);

/// Reduces `v` across all ranks (same dtype and shape everywhere, at least one dimension) and
/// gives this rank its slice of dim 0 (reducescatter_rows). `v` is only read: Chorus reduces a
/// copy. The slice is handle::gathered(), its shape handle::shape(). average divides by size().
handle reducescatter_async(const op_name& name, tensor_view v, reduce_op op = reduce_op::average);
/// The same with wire options.
handle reducescatter_async(const op_name& name, tensor_view v, reduce_op op, const op_options& opts);

/// The same, writing the slice straight into `out`: a caller-owned buffer of v's dtype and
/// shape [reducescatter_rows(dim0, size(), rank()), dims 1.. of v] (checked), written just
/// before the operation ends; handle::gathered() stays empty. For a zero-copy binding:
/// allocate the output tensor, pass both.
handle reducescatter_async(const op_name& name, tensor_view v, tensor_view out, reduce_op op);

/// Sends splits[i] rows of `v`'s dim 0 to rank i (consecutive rows, rank order): `splits` has
/// size() entries, none negative, summing to dim 0; they may differ between ranks, the other
/// dimensions and the dtype must agree. `v` is only read. The rows received (rank order) are
/// handle::gathered(), their shape handle::shape(), the rows from each rank
/// handle::received_splits().
handle alltoall_async(const op_name& name, tensor_view v, std::vector<int64_t> splits);

/// Completion callback of alltoall: the status, the rows received, their shape and the rows
/// that came from each rank.
using alltoall_callback = std::function<void(const status&, const std::vector<std::byte>& received,
                                             const std::vector<int64_t>& shape,
                                             const std::vector<int64_t>& received_splits)>;

/// Horovod's join, for ranks with uneven amounts of data: this rank has no more operations
/// of its own, and until every rank has joined it takes part in the other ranks' operations
/// with neutral data (0 for sum and average, 1 for product, the largest/smallest value for
/// min/max, no rows for allgather and alltoall), so their results are those of the ranks
/// still submitting (an average still divides by size()). Once every rank has joined the
/// handle completes, on every rank, with handle::last_rank() = the last rank to join (the
/// highest of several that joined in the same negotiation cycle). Do not submit operations
/// on this rank until it completes.
handle join_async();
void join_async(std::function<void(const status&, int last_rank)> done);

/// Callback forms: the same operations; `done` runs exactly once with the outcome.
void allreduce_async(const op_name& name, tensor_view v, reduce_op op, done_callback done);
void broadcast_async(const op_name& name, tensor_view v, int root, done_callback done);
void allgather_async(const op_name& name, tensor_view v, gather_callback done);
/// reducescatter: `done` gets the slice and its shape (as handle::gathered() and shape()).
void reducescatter_async(const op_name& name, tensor_view v, reduce_op op, gather_callback done);
void alltoall_async(const op_name& name, tensor_view v, std::vector<int64_t> splits, alltoall_callback done);

}  // namespace chorus
