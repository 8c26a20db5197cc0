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
 * Thread-safety: every function may be called from any thread. Completion callbacks run on a
 * Chorus thread and must not call chorus_init() or chorus_shutdown().
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
  CHORUS_UINT8 = 6
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
 *  error text (valid during the call). `handle` may be released inside the callback. */
typedef void (*chorus_callback)(int64_t handle, int status, const char* error, void* user_data);

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

/** Registers a tensor name (a gradient) once and returns its id (>= 0), to pass to the enqueue
 *  functions at every step. Registering the same name again returns the same id. Returns -1
 *  for a NULL or empty name (see chorus_last_error()). Names stay registered for the life of
 *  the process (across chorus_shutdown() and chorus_init()). */
int64_t chorus_register(const char* name);

/** Allreduce, in place on `data` (`ndim` dimensions in `shape`, outermost first; ndim 0 = one
 *  element; `shape` may be NULL when ndim is 0). Returns a handle (>= 0) or, when the call is
 *  rejected (unknown id, bad dtype/op, negative dimension, NULL data, not initialized, the
 *  same tensor still pending), -1 with chorus_last_error() set; `cb` then never runs.
 *  `cb` may be NULL. Every returned handle must be released with chorus_release(). */
int64_t chorus_enqueue_allreduce(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 chorus_op op, chorus_callback cb, void* user_data);

/** Broadcast of rank `root`'s `data` into `data` on every rank, in place. As allreduce
 *  otherwise; `root` must be in [0, chorus_size()). */
int64_t chorus_enqueue_broadcast(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 int root, chorus_callback cb, void* user_data);

/** Allgather: concatenates every rank's `data` along the first dimension (which may differ
 *  between ranks; ndim >= 1). `data` is only read. Read the result, once done, with
 *  chorus_gathered_data(), chorus_gathered_bytes() and chorus_gathered_shape(). */
int64_t chorus_enqueue_allgather(int64_t id, const void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 chorus_callback cb, void* user_data);

/** 1 when the operation ended (successfully or not), 0 while pending, -1 for an unknown or
 *  released handle (chorus_last_error() says which). Never blocks. */
int chorus_poll(int64_t handle);

/** Waits until the operation ended or `timeout_ms` passed (negative: no deadline). Returns its
 *  chorus_status (the text is in chorus_error_string()), or CHORUS_ERR_TIMEOUT when the time
 *  passed (the operation continues), or CHORUS_ERR_INVALID_ARGUMENT for an unknown handle
 *  (for these two the text is in chorus_last_error()). */
int chorus_wait(int64_t handle, int64_t timeout_ms);

/** The error text of an ended operation that failed; "" while it is pending or when it
 *  succeeded; for an unknown handle, a text saying so. Valid until the handle is released. */
const char* chorus_error_string(int64_t handle);

/** The text of the last failure of a Chorus call on this thread ("" if none): a rejected
 *  enqueue, a failed chorus_init(), an unknown handle or id. Valid until this thread's next
 *  failing Chorus call. */
const char* chorus_last_error(void);

/** Allgather result, once done: the gathered rows, NULL before or on failure. Valid until the
 *  handle is released. */
const void* chorus_gathered_data(int64_t handle);
/** Size of chorus_gathered_data() in bytes; -1 before the end, on failure or for an unknown
 *  handle. */
int64_t chorus_gathered_bytes(int64_t handle);
/** Writes up to `max_ndim` dimensions of the gathered result (the sum of the ranks' first
 *  dimensions, then the input's other dimensions) into `shape` and returns its number of
 *  dimensions; -1 before the end, on failure or for an unknown handle. */
int chorus_gathered_shape(int64_t handle, int64_t* shape, int max_ndim);

/** Frees a handle. A pending operation continues (its callback still runs); only its handle
 *  goes away. Releasing an unknown handle does nothing. */
void chorus_release(int64_t handle);

/** Short name of a status code: "ok", "invalid_argument", "connection_lost", ... */
const char* chorus_status_name(int status);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* CHORUS_C_API_H */
