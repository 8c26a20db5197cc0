// The actor pipeline of one rank (docs/design.md, section 2): boots a CAF actor system, spawns the
// producer, negotiator, fusion, one sender per stream and completion, connects this rank's
// negotiator to every peer's (the control plane: the data plane's control link) and hands
// enqueued operations to them. Bulk bytes go through the communicator's data plane, never through CAF.
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

#include "actors/op_request.hpp"
#include "actors/options.hpp"
#include "actors/stats.hpp"
#include "runtime/collectives/settings_check.hpp"
#include "runtime/config/config.hpp"
#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "telemetry/observer.hpp"

namespace chorus {

class communicator;
namespace tcp {
class control_link;
}

/// Counters for benchmarks and metrics.
struct pipeline_stats {
  negotiation_stats negotiation;     ///< cycles, messages, enqueue → agreed p50/p99 (µs)
  std::vector<stream_stats> streams; ///< one per sender
};

class pipeline {
 public:
  /// Boots the actor system (scheduler tuned for latency, all types registered), checks
  /// through the job's store that every rank was given the same settings (within
  /// opts.connect_timeout), spawns the actors and starts `control`, the control link to every
  /// peer that communicator::connect handed out with `comm`. `comm` must outlive the pipeline.
  static result<std::unique_ptr<pipeline>> start(communicator& comm, std::shared_ptr<tcp::control_link> control,
                                                  const pipeline_options& opts);

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
