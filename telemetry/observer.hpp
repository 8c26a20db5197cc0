// What the actor pipeline tells telemetry: one interface, called by the actors at the moments
// that matter (per op, per cycle, per bucket, per chunk; never per byte). The Prometheus
// metrics (telemetry/metrics/) and the trace recorder (telemetry/trace/) implement it; a
// fanout hands each event to both. Every method has an empty default, so an implementation
// overrides only what it needs.
//
// Threading: each actor calls from its own CAF worker, so different methods (and the same
// method for different streams) may run concurrently. Calls for one stream come from that
// stream's sender only, in order. Implementations must be cheap and never block: no lock
// shared between streams, no I/O on the calling thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/cycle_stats.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::telemetry {

using clock = std::chrono::steady_clock;
using time_point = clock::time_point;

/// The tunables in force (reported at start and whenever they change).
struct tunables {
  std::size_t fusion_threshold = 0;  ///< bytes
  std::size_t chunk_bytes = 0;       ///< bytes
  int streams = 0;
  std::chrono::microseconds cycle_time{0};
  std::size_t in_place_bytes = 0;    ///< allreduce tensors this large skip fusion (0: none)
};

/// The autotuner: one agreed window and what the tuner made of it (identical on every rank).
struct autotune_event {
  uint64_t cycle = 0;          ///< the cycle whose end agreed the window
  uint64_t window = 0;         ///< 1, 2, ...
  double score = 0;            ///< the job's window score: bytes per second, minimum over ranks
  bool sample = false;         ///< a sample ended with this window
  uint64_t sample_index = 0;   ///< 1, 2, ... (with sample)
  double sample_score = 0;     ///< the sample: the median of its windows (with sample)
  bool switched = false;       ///< the tunables changed, in force from batches of cycle + 1
  tunables in_force;           ///< the tunables after this window
  uint64_t digest = 0;         ///< the tuner's state digest after this window
  bool watching = false;       ///< the search has converged and the tuner watches (after this window)
};

/// One call of a torch.distributed group (bindings/ordered), once it ended: no negotiation, so
/// one event per call says all there is.
struct call_event {
  std::string_view group;   ///< the group's name ("0", "1", ...)
  uint64_t seq = 0;         ///< the call's number in its group (1, 2, ...)
  std::string_view call;    ///< torch's name: "all_reduce", "broadcast", "send", ...
  std::size_t bytes = 0;    ///< bytes of its tensors on this rank
  const status* result = nullptr;  ///< how it ended
  time_point started;       ///< when it was issued
};

/// One negotiation cycle of this rank, once it finished: the strategy's own report.
using cycle_event = negotiation::cycle_stats;

/// One bucket as fusion planned it (identical on every rank but for allgather row counts).
struct bucket_event {
  uint64_t bucket = 0;
  uint64_t cycle = 0;                 ///< the agreed batch it came from
  uint64_t first_sequence = 0;
  uint32_t chunks = 0;
  std::size_t bytes = 0;              ///< payload bytes of the bucket on this rank
  bool in_place = false;              ///< reduced in the op's own buffer (no fusion copy)
  std::string kind;                   ///< "allreduce", "broadcast", "allgather", ...
  std::vector<std::string> tensors;   ///< member names, in plan order
  /// Allreduce buckets: the algorithm of its chunks ("ring", "recursive_doubling",
  /// "hier_sharded", "hier_leader"; several joined by '+'); allgather buckets:
  /// "ring_allgather" or "hier_allgather"; empty for other collectives.
  std::string algorithm;
};

// Every event, written once: X(name, (parameters), (arguments)). `observer` declares each as a
// virtual with an empty default and `forwarding_observer` forwards each, so a new event is one
// entry here (and the overrides of whoever wants it).
#define CHORUS_OBSERVER_EVENTS(X)                                                                              \
  /* ---- producer: the API boundary ---- */                                                                 \
  /* An op reached the pipeline (handle = the producer's key, unique per rank and run). */                   \
  X(on_enqueue, (uint64_t handle, const tensor_spec& spec, time_point at), (handle, spec, at))                \
  /* Its callback runs now (reported just before it, so a caller the callback wakes finds the event         \
     reported): `result` ok or the error; `enqueued` is when on_enqueue saw it. */                           \
  X(on_callback, (uint64_t handle, const tensor_spec& spec, const status& result, time_point enqueued,         \
                  time_point at),                                                                            \
    (handle, spec, result, enqueued, at))                                                                    \
  /* ---- negotiator ---- */                                                                                 \
  /* The op entered this rank's negotiation; `cycle` is the first cycle that can agree it (this rank's       \
     finished cycles + 1). */                                                                                \
  X(on_ready, (uint64_t handle, const tensor_spec& spec, uint64_t cycle, time_point at), (handle, spec, cycle, at)) \
  /* A control message to rank `to` / from a peer: the encoded negotiation::gossip_message. */              \
  X(on_gossip_sent, (int to, std::span<const uint8_t> bytes, time_point at), (to, bytes, at))                  \
  X(on_gossip_received, (std::span<const uint8_t> bytes, time_point at), (bytes, at))                          \
  /* A cycle of this rank finished. */                                                                       \
  X(on_cycle, (const cycle_event& c), (c))                                                                   \
  /* Ops agreed in `cycle`, in agreed order, each with its enqueue -> agreed latency. */                     \
  X(on_agreed, (uint64_t cycle, std::span<const std::string> names,                                           \
                std::span<const std::chrono::microseconds> latencies, time_point at),                        \
    (cycle, names, latencies, at))                                                                           \
  /* A stall warning: `name` is pending on some ranks but not on `missing_ranks`. */                        \
  X(on_stall, (const std::string& name, std::span<const int> missing_ranks, time_point at),                    \
    (name, missing_ranks, at))                                                                               \
  /* ---- fusion ---- */                                                                                     \
  X(on_bucket, (const bucket_event& b, time_point at), (b, at))                                              \
  /* ---- senders (one per stream) ---- */                                                                   \
  X(on_chunk_start, (int stream, uint64_t sequence, std::size_t bytes, time_point at), (stream, sequence, bytes, at)) \
  X(on_chunk_end, (int stream, uint64_t sequence, std::size_t bytes, const status& result, time_point started,  \
                   time_point at),                                                                           \
    (stream, sequence, bytes, result, started, at))                                                          \
  /* Sender `thief` took a chunk from `victim`'s deque. */                                                   \
  X(on_steal, (int thief, int victim, uint64_t sequence, time_point at), (thief, victim, sequence, at))        \
  /* ---- anywhere ---- */                                                                                   \
  /* An error ended ops; `kind` is errc's name ("mismatch", "connection_lost", ...). */                       \
  X(on_error, (std::string_view kind, const status& error, time_point at), (kind, error, at))                 \
  /* The NaN/Inf check found non-finite input in `ranks` for a bucket of `tensors`; `mode` is "error" (the   \
     ops failed) or "skip" (they completed flagged). Reported on every rank. */                              \
  X(on_nonfinite, (std::span<const std::string> tensors, std::span<const int> ranks, std::string_view mode,    \
                   time_point at),                                                                           \
    (tensors, ranks, mode, at))                                                                              \
  /* A chunk of `raw_bytes` of the caller's data went over the wire compressed to `wire_bytes`. */           \
  X(on_compressed, (int stream, std::size_t raw_bytes, std::size_t wire_bytes, time_point at),                 \
    (stream, raw_bytes, wire_bytes, at))                                                                     \
  /* The pipeline's chunks have a direct path on this host (actors/fusion_actor.hpp), taking chunks up to   \
     `max_bytes` (SIZE_MAX: all); at start, only when there is one. It shapes the plan (trace replay). */    \
  X(on_direct_path, (std::size_t max_bytes, time_point at), (max_bytes, at))                                  \
  /* A torch.distributed group's call ended (`at`): one event per call. */                                  \
  X(on_call, (const call_event& e, time_point at), (e, at))                                                  \
  /* The tunables in force: at start and after every switch. */                                              \
  X(on_tunables, (const tunables& t, time_point at), (t, at))                                                \
  /* The autotuner handled an agreed window (CHORUS_AUTOTUNE=1); on_tunables follows a switch. */            \
  X(on_autotune, (const autotune_event& e, time_point at), (e, at))

// The defaults ignore their arguments; the names document them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
class observer {
 public:
  virtual ~observer() = default;
#define CHORUS_OBSERVER_DEFAULT(name, params, args) virtual void name params {}
  CHORUS_OBSERVER_EVENTS(CHORUS_OBSERVER_DEFAULT)
#undef CHORUS_OBSERVER_DEFAULT
};
#pragma GCC diagnostic pop

/// An observer that hands every event on: each method calls `Derived::forward(call)`, which
/// calls `call(observer&)` for whichever observers it chooses (none, one, several), so a
/// forwarder (fan-out, swappable slot, benchmark switch) writes only that choice. `forward`
/// must be accessible to this base (public, or befriend it).
template <class Derived>
class forwarding_observer : public observer {
 public:
#define CHORUS_OBSERVER_FORWARD(name, params, args) \
  void name params override { static_cast<Derived*>(this)->forward([&](observer& o) { o.name args; }); }
  CHORUS_OBSERVER_EVENTS(CHORUS_OBSERVER_FORWARD)
#undef CHORUS_OBSERVER_FORWARD
};

/// An observer that hands every event to each of `parts` (null parts are skipped); returns
/// null when none is left, and the single part when only one is.
std::shared_ptr<observer> fan_out(std::vector<std::shared_ptr<observer>> parts);

}  // namespace chorus::telemetry
