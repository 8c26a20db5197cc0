// An in-process job: N ranks' negotiator actors (and, optionally, fusion actors) in ONE actor
// system, wired to each other directly as local caf::actor handles (the in-process
// transport) with a modelled one-way link latency. Capture actors stand in for each rank's
// producer, senders and completion and record what the real actors decided: agreed batches,
// bucket plans, chunks, errors; a capture observer records each rank's cycles and messages.
// Only the wire is modelled; the actors and their messages are the real ones. Used by
// `chorus-bench negotiation` (scale: N up to 1024) and by trace replay.
//
// Message flow per rank r:
//   enqueue(r, spec) ─tensor_ready─▶ negotiator r ◀─gossip_bytes (delayed by link_latency)─▶ peers
//   negotiator r ─batch_agreed─▶ capture r [─batch_agreed─▶ fusion r ─bucket_planned, chunk_work─▶
//   capture r ─chunk_ended─▶ fusion r]   (brackets: only with fusion on; chunks "end" at once)
//   negotiator r ─op_finished (errors)─▶ capture r
//
// Thread-safety: start/stop from one thread; enqueue, wait and the accessors from any thread
// (accessors return copies taken under a per-rank lock).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/strategy.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "telemetry/observer.hpp"

namespace chorus {

struct in_process_job_options {
  int ranks = 2;                                   ///< N, at least 1
  std::string strategy = "gossip";                 ///< "gossip" or "central"
  negotiation::negotiation_options negotiation;    ///< cycle_time (0 for benchmarks), stall times
  /// One-way latency of every control message between two ranks (0: delivered at once).
  /// Modelled by the sending negotiator with a delayed send (negotiator_config::link_latency).
  std::chrono::microseconds link_latency{0};
  /// Spawn a real fusion actor per rank behind the capture; bucket plans and chunks are then
  /// recorded. Off: agreed batches only.
  bool fusion = false;
  std::size_t fusion_threshold = 64u << 20;        ///< as pipeline_options
  std::size_t chunk_bytes = 4u << 20;              ///< as pipeline_options
  std::size_t in_place_bytes = 0;                  ///< as pipeline_options (0: fuse everything)
  std::size_t small_bytes = 64u << 10;             ///< chunks up to this use exchange_allreduce
  std::size_t start_window = 16;                   ///< as pipeline_options
  std::size_t pool_bytes = 64u << 20;              ///< fusion buffer pool per rank (not pre-touched)
  int streams = 1;                                 ///< sender stand-ins per rank (chunk routing)
  int scheduler_threads = 2;                       ///< CAF worker threads for all ranks together
  /// false: CAF workers sleep when idle (as the pipeline runs); true: CAF's default polling.
  bool busy_poll = false;
  /// Optional: rank → that rank's telemetry observer (called from the rank's actors, see
  /// telemetry/observer.hpp); may return null. The job's own recording does not need it.
  std::function<std::shared_ptr<telemetry::observer>(int rank)> observer;
};

/// One agreed batch as rank r saw it.
struct agreed_record {
  uint64_t cycle = 0;
  std::vector<std::string> names;  ///< agreed order
  std::vector<uint64_t> handles;   ///< enqueue() return values, same order
  std::chrono::steady_clock::time_point at;  ///< when the capture received it
};

/// One bucket as rank r's fusion actor planned it (fusion on only).
struct bucket_record {
  uint64_t bucket = 0;
  uint64_t first_sequence = 0;
  uint32_t chunks = 0;
  std::size_t bytes = 0;
  bool in_place = false;
  std::vector<std::string> names;  ///< members, in plan order
};

/// An op that ended with an error on rank r (mismatch, stall shutdown, stop).
struct failed_record {
  uint64_t handle = 0;
  std::string name;
  status error;
};

/// Control messages rank r's negotiator sent and received since start.
struct message_counts {
  uint64_t sent = 0;
  uint64_t received = 0;
};

class in_process_job {
 public:
  /// Boots the actor system, spawns and wires every rank. errc::config for bad options.
  static result<std::unique_ptr<in_process_job>> start(const in_process_job_options& options);
  ~in_process_job();  ///< stop()
  in_process_job(const in_process_job&) = delete;
  in_process_job& operator=(const in_process_job&) = delete;

  int size() const;

  /// Hands `spec` to rank r's negotiator as a local tensor_ready, stamped now. Returns the
  /// op's handle (unique per job). For allgather, spec.shape[0] is this rank's row count, as
  /// for pipeline::enqueue. With fusion on, the op points at a zeroed scratch buffer.
  uint64_t enqueue(int rank, const tensor_spec& spec);

  /// Waits until every op enqueued so far ended on its rank (agreed or failed). ok when all
  /// were agreed; the first failure (naming its rank) when one failed; errc::timeout naming
  /// the ranks and tensors still pending when `timeout` passed first.
  status wait(std::chrono::milliseconds timeout);

  std::vector<agreed_record> batches(int rank) const;
  std::vector<bucket_record> buckets(int rank) const;
  std::vector<telemetry::cycle_event> cycles(int rank) const;  ///< finished cycles, in order
  std::vector<failed_record> failures(int rank) const;
  message_counts messages(int rank) const;
  /// "" when every rank agreed the same batches (cycle and names, in order); otherwise the
  /// first difference, e.g. "rank 3 batch 2: cycle 5 [a,b] but rank 0 has cycle 5 [a]".
  std::string divergence() const;

  /// Stops every actor (ops still in negotiation end with errc::shutdown first) and the
  /// system. Idempotent.
  void stop();

  struct impl;

 private:
  explicit in_process_job(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace chorus
