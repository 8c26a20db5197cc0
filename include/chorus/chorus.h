/* Chorus C API: gradients from frameworks without Python (Caffe, custom C/C++ trainers).
 *
 * Typical use:
 *   chorus_init();
 *   int64_t id = chorus_register("conv1.weight.grad");          // once per gradient
 *   int64_t h = chorus_enqueue_allreduce(id, data, shape, 4, CHORUS_FLOAT32,
 *                                        CHORUS_OP_AVERAGE, NULL, NULL);  // every step
 *   if (h < 0) fprintf(stderr, "%s\n", chorus_last_error());
 *   if (chorus_wait(h, -1) != CHORUS_OK) fprintf(stderr, "%s\n", chorus_error_string(h));
 *   chorus_release(h);
 *   chorus_shutdown();
 *
 * Every collective follows the same pattern: register the name once, enqueue by id (a handle
 * >= 0, or -1 with chorus_last_error() naming the tensor), chorus_poll()/chorus_wait() or a
 * callback, read the result rows (chorus_gathered_*(), chorus_received_splits(),
 * chorus_last_rank()) and chorus_release() the handle. Collectives: allreduce, broadcast,
 * allgather, reducescatter (result owned by the handle, or written into your buffer),
 * alltoall with per-rank splits, and join (for ranks with uneven amounts of data).
 * chorus_start_timeline()/chorus_stop_timeline() record Horovod's timeline at run time.
 *
 * Plain C (C99 and later) and C++; tests/bindings/c_header_test.c compiles it as C with
 * -pedantic -Werror.
 *
 * Thread-safety: every function may be called from any thread. Completion callbacks run on a
 * Chorus thread and must not call chorus_init() or chorus_shutdown(). Chorus threads run under
 * SCHED_BATCH unless CHORUS_SCHEDULER_BATCH=0; a thread a callback starts inherits it.
 * Buffers are the caller's: Chorus works on them in place, without copying them when no copy
 * is needed; they must stay alive and untouched until the operation ended.
 */
#ifndef CHORUS_C_API_H
#define CHORUS_C_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Outcome codes. CHORUS_OK is 0; every error is positive and has a text
 *  (chorus_last_error() or chorus_error_string()). */
typedef enum chorus_status {
  CHORUS_OK = 0,
  CHORUS_ERR_INVALID_ARGUMENT = 1, /**< bad input at the call (names the tensor and the value) */
  CHORUS_ERR_CONFIG = 2,           /**< missing or contradictory environment / settings */
  CHORUS_ERR_RENDEZVOUS = 3,       /**< the rendezvous was unreachable or ranks never arrived */
  CHORUS_ERR_CONNECTION_LOST = 4,  /**< a peer rank died or its connection broke */
  CHORUS_ERR_PROTOCOL = 5,         /**< a frame failed validation */
  CHORUS_ERR_AUTH = 6,             /**< the handshake failed (wrong job secret) */
  CHORUS_ERR_TIMEOUT = 7,          /**< chorus_wait() timed out (the operation continues) */
  CHORUS_ERR_MISMATCH = 8,         /**< ranks disagree on the tensor's dtype, shape, op or root */
  CHORUS_ERR_SHUTDOWN = 9,         /**< Chorus shut down with the operation pending */
  CHORUS_ERR_INTERNAL = 10         /**< a broken invariant inside Chorus */
} chorus_status;

/** Element types (same numbering as the C++ chorus::dtype). */
typedef enum chorus_dtype {
  CHORUS_FLOAT16 = 0,  /**< IEEE half, stored as raw 16-bit words; accumulates in f32 */
  CHORUS_BFLOAT16 = 1, /**< bfloat16, stored as raw 16-bit words; accumulates in f32 */
  CHORUS_FLOAT32 = 2,
  CHORUS_FLOAT64 = 3,
  CHORUS_INT32 = 4,
  CHORUS_INT64 = 5,
  CHORUS_UINT8 = 6,
  CHORUS_INT8 = 7,
  CHORUS_INT16 = 8,
  CHORUS_BOOL = 9 /**< one byte, 0 or 1; sum/max reduce as "or", min/product as "and", no average */
} chorus_dtype;

/** Reduction operators of allreduce (same numbering as the C++ chorus::reduce_op). */
typedef enum chorus_op {
  CHORUS_OP_SUM = 0,
  CHORUS_OP_AVERAGE = 1, /**< sum divided by the number of ranks (integers: truncated) */
  CHORUS_OP_MIN = 2,
  CHORUS_OP_MAX = 3,
  CHORUS_OP_PRODUCT = 4
} chorus_op;

/** Completion callback: runs exactly once per accepted operation, on a Chorus thread, after
 *  the handle is done. `status` is a chorus_status; `error` is NULL on success, else the
 *  error text (valid during the call). The result functions (chorus_gathered_data(),
 *  chorus_received_splits(), chorus_last_rank(), ...) work on `handle` inside the callback;
 *  `handle` may be released there too (read the results first). */
typedef void (*chorus_callback)(int64_t handle, int status, const char* error, void* user_data);

/** The version of the installed package, e.g. "0.1.0". Defined in libchorus.so (the package
 *  `cmake --install` makes, bindings/package), not in the in-tree static libraries. */
const char* chorus_package_version(void);

/** Joins the job described by the environment (CHORUS_RANK/SIZE/RENDEZVOUS, torchrun's,
 *  Open MPI's, PMI's or Slurm's variables; none: a job of one rank), connects to the other
 *  ranks and starts the pipeline. Blocks until all ranks arrived or the rendezvous timed out.
 *  Returns CHORUS_OK (also when already initialized) or an error code; chorus_last_error()
 *  says why. */
int chorus_init(void);

/** Stops Chorus: every pending operation ends with CHORUS_ERR_SHUTDOWN (callbacks run) before
 *  it returns. Handles stay valid until released. A no-op when not initialized. */
void chorus_shutdown(void);

/** 1 between a successful chorus_init() and chorus_shutdown(), else 0. */
int chorus_is_initialized(void);

/** This process' rank in [0, chorus_size()); -1 when not initialized. */
int chorus_rank(void);
/** Number of ranks in the job; -1 when not initialized. */
int chorus_size(void);
/** Rank among this job's ranks on this host; -1 when not initialized. */
int chorus_local_rank(void);
/** Number of this job's ranks on this host; -1 when not initialized. */
int chorus_local_size(void);

/** Horovod's timeline: starts recording this rank's operations (each tensor's negotiation,
 *  queue and collective phases, negotiation cycles, fusion buckets, chunks per stream) for a
 *  Chrome-trace JSON file at `path` (chrome://tracing, ui.perfetto.dev), written by
 *  chorus_stop_timeline() or chorus_shutdown(). `mark_cycles` non-zero adds a CYCLE_START
 *  instant per negotiation cycle. Only rank 0 records and writes the file; on other ranks it
 *  does nothing and returns CHORUS_OK. `path` is created (empty) at once. A second call while
 *  recording writes the first timeline and starts a new one at the new path.
 *  Returns CHORUS_OK; CHORUS_ERR_CONFIG when `path` is empty or cannot be created (the text
 *  names it); CHORUS_ERR_INVALID_ARGUMENT for a NULL path, when not initialized or when called
 *  from a completion callback. chorus_last_error() says why. */
int chorus_start_timeline(const char* path, int mark_cycles);

/** Stops the timeline and writes it (Chrome-trace JSON) to chorus_start_timeline()'s path;
 *  returns once it is written. CHORUS_OK, also when no timeline runs (then it does nothing);
 *  CHORUS_ERR_CONFIG when writing the file failed; CHORUS_ERR_INVALID_ARGUMENT when called from
 *  a completion callback. chorus_last_error() says why. */
int chorus_stop_timeline(void);

/** Registers a tensor name (a gradient) once and returns its id (>= 0), to pass to the enqueue
 *  functions at every step. Registering the same name again returns the same id. Returns -1
 *  for a NULL or empty name (see chorus_last_error()). Names stay registered for the life of
 *  the process (across chorus_shutdown() and chorus_init()). */
int64_t chorus_register(const char* name);

/** As chorus_register, for a name used once or rarely (Horovod's unnamed ops, e.g. a loss
 *  averaged for logging under a fresh name each step): its operations are negotiated as
 *  transient, so every rank frees the negotiated id as soon as each operation is agreed and
 *  one-off names do not grow the negotiation's messages. Every rank must register a name the
 *  same way: ranks that disagree get CHORUS_ERR_MISMATCH naming the tensor ("transient").
 *  Returns -1 for a NULL or empty name, or for a name already registered with
 *  chorus_register (and chorus_register returns -1 for a name registered here). */
int64_t chorus_register_transient(const char* name);

/** As chorus_register, for a tensor whose operations run in process set `process_set` (an id
 *  from chorus_init_with_process_sets' order or chorus_add_process_set; 0 is the job): every
 *  enqueue of the returned id runs among the set's members only (see chorus_add_process_set).
 *  A set has names of its own: one name in two sets gives two ids. -1 for a negative set. */
int64_t chorus_register_in_process_set(const char* name, int process_set);

/** Sets the priority of registered tensor `id` for its later enqueues: with CHORUS_PRIORITY=on
 *  waiting work goes larger priority first, and a big bucket's remaining chunks yield to a later
 *  one of larger priority. Give the first layers' gradients the largest. Every rank must give a
 *  name the same priority (ranks that disagree get CHORUS_ERR_MISMATCH, "priority"). 0 by
 *  default. CHORUS_OK, or CHORUS_ERR_INVALID_ARGUMENT for an unknown id. */
int chorus_set_priority(int64_t id, int priority);

/** chorus_init with Horovod's static process sets: `count` sets, set i being the
 *  `sizes[i]` job ranks starting at ranks[sizes[0] + ... + sizes[i-1]]; they get ids 1..count
 *  in order. Every rank must pass the same sets. Returns CHORUS_OK or an error code
 *  (chorus_last_error() says why). */
int chorus_init_with_process_sets(const int* ranks, const int* sizes, int count);

/** Registers a process set of `nranks` job ranks after init (CHORUS_DYNAMIC_PROCESS_SETS=1,
 *  alias HOROVOD_DYNAMIC_PROCESS_SETS). Collective: every rank calls it with the same ranks.
 *  Returns the set's id (> 0), the same on every rank, or -1 (chorus_last_error() says why:
 *  not allowed, a bad or duplicate set, ranks that asked for different sets). */
int chorus_add_process_set(const int* ranks, int nranks);

/** Removes process set `id` (collective, as chorus_add_process_set). Returns CHORUS_OK or an
 *  error code. */
int chorus_remove_process_set(int id);

/** This rank among set `id`'s members; -1 when the set is unknown or leaves this rank out. */
int chorus_process_set_rank(int id);

/** Number of ranks in set `id`; -1 for an unknown set. */
int chorus_process_set_size(int id);

/** 1 when this rank is a member of set `id`, 0 when not, -1 for an unknown set. */
int chorus_process_set_included(int id);

/** Copies set `id`'s job ranks (ascending) into `ranks` (room for `capacity`); returns the
 *  set's size (copying at most `capacity`), or -1 for an unknown set. */
int chorus_process_set_ranks(int id, int* ranks, int capacity);

/** Returns once every rank of process set `process_set` (0: the job) called it. CHORUS_OK or
 *  an error code (a rank outside the set: CHORUS_ERR_INVALID_ARGUMENT). */
int chorus_barrier(int process_set);

/** Allreduce, in place on `data` (`ndim` dimensions in `shape`, outermost first; ndim 0 = one
 *  element; `shape` may be NULL when ndim is 0). Returns a handle (>= 0) or, when the call is
 *  rejected (unknown id, bad dtype/op, negative dimension, NULL data, not initialized, the
 *  same tensor still pending), -1 with chorus_last_error() set; `cb` then never runs.
 *  `cb` may be NULL. Every returned handle must be released with chorus_release(). */
int64_t chorus_enqueue_allreduce(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 chorus_op op, chorus_callback cb, void* user_data);

/** Several allreduces in one call (e.g. a layer's weight and bias, ready at the same moment):
 *  they reach the runtime in one message, so they share a negotiation cycle and, when small,
 *  a fused buffer; each is still its own operation with its own handle. Element i is
 *  `ids[i]`, `data[i]`, `shapes[i]` (`ndims[i]` dimensions; may be NULL when 0),
 *  `dtypes[i]`; `op`, `cb` and `user_data` are shared. `handles[i]` receives element i's
 *  handle, or -1 when its arguments are rejected as chorus_enqueue_allreduce() would reject
 *  them (chorus_last_error() then names the last such element); an element refused by the
 *  runtime (e.g. the same tensor still pending) gets a handle that has already ended with its
 *  error (and `cb` runs for it). Returns the number of handles given (>= 0), or -1 when the
 *  arrays themselves are unusable (count < 0, a NULL array with count > 0). */
int chorus_enqueue_allreduce_batch(int count, const int64_t* ids, void* const* data, const int64_t* const* shapes,
                                   const int* ndims, const chorus_dtype* dtypes, chorus_op op, int64_t* handles,
                                   chorus_callback cb, void* user_data);

/** Broadcast of rank `root`'s `data` into `data` on every rank, in place. As allreduce
 *  otherwise; `root` must be in [0, chorus_size()). */
int64_t chorus_enqueue_broadcast(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 int root, chorus_callback cb, void* user_data);

/** Where a buffer lives. CHORUS_DEVICE_CUDA: `index` is its CUDA device and `stream` the
 *  cudaStream_t (NULL: the legacy default stream) whose queued work produces it; Chorus records
 *  an event there at the call and reads the buffer only after that work, without blocking. */
typedef enum chorus_device_kind { CHORUS_DEVICE_CPU = 0, CHORUS_DEVICE_CUDA = 1 } chorus_device_kind;
typedef struct chorus_device {
  chorus_device_kind kind;
  int index;
  void* stream;
} chorus_device;

/** chorus_enqueue_allreduce and chorus_enqueue_broadcast for a buffer on `device` (CUDA device
 *  memory needs a build with CUDA; every rank must pass the same kind of device, else each
 *  gets a mismatch error naming the ranks). */
int64_t chorus_enqueue_allreduce_on(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                    chorus_op op, chorus_device device, chorus_callback cb, void* user_data);
int64_t chorus_enqueue_broadcast_on(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                    int root, chorus_device device, chorus_callback cb, void* user_data);

/** Allgather: concatenates every rank's `data` along the first dimension (which may differ
 *  between ranks; ndim >= 1). `data` is only read. Read the result, once done, with
 *  chorus_gathered_data(), chorus_gathered_bytes() and chorus_gathered_shape(). */
int64_t chorus_enqueue_allgather(int64_t id, const void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 chorus_callback cb, void* user_data);

/** Rows of dim 0 that rank `rank` of `size` ranks gets from a reducescatter of `dim0` rows
 *  (Horovod's split: dim0 / size, plus one for each of the first dim0 % size ranks); 0 for
 *  arguments out of range. Rank r's rows start at the sum of this for the ranks below r. */
int64_t chorus_reducescatter_rows(int64_t dim0, int size, int rank);

/** Reducescatter: reduces `data` (same dtype and shape on every rank, ndim >= 1) across all
 *  ranks with `op` and gives this rank its slice of dim 0 (chorus_reducescatter_rows(shape[0],
 *  chorus_size(), chorus_rank()) rows, then the input's other dimensions). `data` is only
 *  read. Read the slice, once done, with chorus_gathered_data(), chorus_gathered_bytes() and
 *  chorus_gathered_shape(). Rejections as allreduce. */
int64_t chorus_enqueue_reducescatter(int64_t id, const void* data, const int64_t* shape, int ndim,
                                     chorus_dtype dtype, chorus_op op, chorus_callback cb, void* user_data);

/** The same, writing this rank's slice straight into `out`: a buffer of `out_rows` rows (dims
 *  1.. and dtype of the input), where `out_rows` must be chorus_reducescatter_rows(shape[0],
 *  chorus_size(), chorus_rank()) (checked; the error names the tensor and the slice). `out`
 *  is written just before the operation ends; it may be NULL only when the slice is empty.
 *  chorus_gathered_shape() gives the slice's shape, chorus_gathered_bytes() 0. */
int64_t chorus_enqueue_reducescatter_into(int64_t id, const void* data, const int64_t* shape, int ndim,
                                          chorus_dtype dtype, chorus_op op, void* out, int64_t out_rows,
                                          chorus_callback cb, void* user_data);

/** Alltoall: sends splits[i] rows of `data`'s dim 0 to rank i (consecutive rows, in rank
 *  order). `nsplits` must be chorus_size(); splits are >= 0 and sum to shape[0] (ndim >= 1);
 *  they may differ between ranks, the other dimensions and the dtype must agree. `data` is
 *  only read. Once done: the rows received (in rank order) through chorus_gathered_data(),
 *  chorus_gathered_bytes() and chorus_gathered_shape(), the rows from each rank through
 *  chorus_received_splits(). Rejections as allreduce, and bad splits (the text names the
 *  split's index for a negative one or one that makes the sum overflow int64). */
int64_t chorus_enqueue_alltoall(int64_t id, const void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                const int64_t* splits, int nsplits, chorus_callback cb, void* user_data);

/** Wire options of one operation (compression on the wire, the NaN/Inf check). A field set to
 *  -1 takes the job's default (CHORUS_COMPRESSION, CHORUS_NAN_CHECK), which applies only where
 *  it can; asked for explicitly where it cannot (compression of an integer tensor, of a min)
 *  the call is rejected (-1, chorus_last_error() names the tensor). `prescale` multiplies each
 *  rank's input (in f32) before a compressed sum; 1 otherwise. */
typedef enum chorus_compression {
  CHORUS_COMPRESSION_DEFAULT = -1,
  CHORUS_COMPRESSION_NONE = 0,
  CHORUS_COMPRESSION_FP16 = 1,
  CHORUS_COMPRESSION_BF16 = 2
} chorus_compression;
typedef enum chorus_nan_check {
  CHORUS_NAN_CHECK_DEFAULT = -1,
  CHORUS_NAN_CHECK_OFF = 0,
  CHORUS_NAN_CHECK_ERROR = 1, /* NaN/Inf on any rank: the op fails on every rank, naming tensors and ranks */
  CHORUS_NAN_CHECK_SKIP = 2   /* the op completes; chorus_nonfinite_ranks() lists the ranks, alike on all */
} chorus_nan_check;
typedef struct chorus_wire_options {
  int compression; /* a chorus_compression */
  int nan_check;   /* a chorus_nan_check */
  float prescale;
} chorus_wire_options;

/** chorus_enqueue_allreduce, chorus_enqueue_reducescatter and chorus_enqueue_allgather with
 *  wire options (`wire` NULL: every field -1, prescale 1). */
int64_t chorus_enqueue_allreduce_wire(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                      chorus_op op, const chorus_wire_options* wire, chorus_callback cb,
                                      void* user_data);
int64_t chorus_enqueue_reducescatter_wire(int64_t id, const void* data, const int64_t* shape, int ndim,
                                          chorus_dtype dtype, chorus_op op, const chorus_wire_options* wire,
                                          chorus_callback cb, void* user_data);
int64_t chorus_enqueue_allgather_wire(int64_t id, const void* data, const int64_t* shape, int ndim,
                                      chorus_dtype dtype, const chorus_wire_options* wire, chorus_callback cb,
                                      void* user_data);

/** An allreduce or reducescatter with the NaN/Inf check in skip mode, once done: writes up to
 *  `capacity` ranks whose input held NaN/Inf (ascending, the same on every rank) to `ranks` and
 *  returns how many there are (0: all finite; also for other operations). -1 for an unknown
 *  handle. */
int chorus_nonfinite_ranks(int64_t handle, int* ranks, int capacity);

/** Join (Horovod's, for ranks with uneven amounts of data): this rank has no more operations
 *  of its own; until every rank has joined it takes part in the other ranks' operations with
 *  neutral data (0 for sum/average, 1 for product, the extreme value for min/max, no rows for
 *  allgather/alltoall). The handle completes on every rank once all have joined; then
 *  chorus_last_rank() gives the last rank to join (the highest of several that joined in the
 *  same cycle). Enqueue nothing else on this rank until it completed. Returns -1 when Chorus
 *  is not initialized (chorus_last_error()); errors of the join itself (shutdown, a lost peer)
 *  end the handle. */
int64_t chorus_enqueue_join(chorus_callback cb, void* user_data);

/** 1 when the operation ended (successfully or not), 0 while pending, -1 for an unknown or
 *  released handle (chorus_last_error() says which). Never blocks. */
int chorus_poll(int64_t handle);

/** Waits until the operation ended or `timeout_ms` passed (negative: no deadline). Returns its
 *  chorus_status (the text is in chorus_error_string()), or CHORUS_ERR_TIMEOUT when the time
 *  passed (the operation continues), or CHORUS_ERR_INVALID_ARGUMENT for an unknown handle or
 *  for a wait (timeout_ms != 0) inside a completion callback, which would block the thread
 *  that completes operations (for these the text is in chorus_last_error()). */
int chorus_wait(int64_t handle, int64_t timeout_ms);

/** The error text of an ended operation that failed; "" while it is pending or when it
 *  succeeded; for an unknown handle, a text saying so. Valid until the handle is released. */
const char* chorus_error_string(int64_t handle);

/** The text of the last failure of a Chorus call on this thread ("" if none): a rejected
 *  enqueue, a failed chorus_init(), an unknown handle or id. Valid until this thread's next
 *  failing Chorus call. */
const char* chorus_last_error(void);

/** The result rows of an allgather, alltoall or reducescatter, once done: allgather, the rows
 *  of every rank in rank order; alltoall, the rows received in rank order; reducescatter, this
 *  rank's slice. NULL before the end, on failure, when there are no bytes (an empty result,
 *  chorus_enqueue_reducescatter_into()) and for other kinds. Valid until the handle is
 *  released. */
const void* chorus_gathered_data(int64_t handle);
/** Size of chorus_gathered_data() in bytes (0 for chorus_enqueue_reducescatter_into()); -1
 *  before the end, on failure, for allreduce/broadcast/join or for an unknown handle. */
int64_t chorus_gathered_bytes(int64_t handle);
/** Writes up to `max_ndim` dimensions of the result rows into `shape` and returns their number
 *  of dimensions (allgather: the sum of the ranks' first dimensions; alltoall: the rows
 *  received; reducescatter: this rank's rows; then the input's other dimensions); -1 before
 *  the end, on failure, for allreduce/broadcast/join or for an unknown handle. */
int chorus_gathered_shape(int64_t handle, int64_t* shape, int max_ndim);

/** Alltoall, once done: writes up to `max` counts of rows received from each rank (rank
 *  order, Horovod's received_splits) into `splits` and returns chorus_size(); -1 before the
 *  end, on failure, for other kinds or for an unknown handle. */
int chorus_received_splits(int64_t handle, int64_t* splits, int max);

/** Join, once done successfully: the last rank to join; -1 before the end, on failure, for
 *  other kinds or for an unknown handle. */
int chorus_last_rank(int64_t handle);

/** Frees a handle. A pending operation continues (its callback still runs); only its handle
 *  goes away. Releasing an unknown handle does nothing. */
void chorus_release(int64_t handle);

/** Short name of a status code: "ok", "invalid_argument", "connection_lost", ... */
const char* chorus_status_name(int status);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* CHORUS_C_API_H */
