// The in-process data plane, for unit tests and the scale simulator. A local_fabric owns N
// endpoints (chorus::transport, ranks 0..N-1, S streams) and ONE executor shared by all of
// them, so every frame_sink call of every rank happens on that executor, one at a time.
// Sinks receive: destination/delivered (frames from peers), sent (our payload released),
// peer_failed (a killed rank, or a frame that fails the wire codec).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

#include "runtime/transport/transport.hpp"

namespace chorus::local {

/// What a delay model sees of one frame at send time.
struct frame_route {
  int src = 0;
  int dst = 0;
  int stream = 0;
  std::size_t bytes = 0;         ///< payload bytes
  std::chrono::nanoseconds now{};  ///< virtual time of the send
};

/// Virtual time from send() to delivery of one frame (>= 0). Called on the thread that calls
/// send(), with the fabric's lock held: it must not call back into the fabric.
using delay_fn = std::function<std::chrono::nanoseconds(const frame_route&)>;

/// Latency plus serialisation per (src, dst, stream) link: a frame waits until the link is
/// free, occupies it for bytes / bytes_per_second, and arrives `latency` after that.
delay_fn link_model(std::chrono::nanoseconds latency, double bytes_per_second);
/// Uniform random delay in [0, max], from a seeded generator: reorders frames of different
/// links (each link stays FIFO) to explore interleavings reproducibly.
delay_fn random_delay(uint64_t seed, std::chrono::nanoseconds max);

struct fabric_options {
  int size = 1;                         ///< ranks, one endpoint each
  int num_streams = 1;                  ///< streams per pair of ranks
  uint64_t job_id = 0x6c6f63616c;       ///< what endpoints report; frames of another job are refused
  uint32_t max_payload = 64u << 20;     ///< frames announcing more are refused, as over TCP
  /// false (deterministic, for unit tests): no thread; the caller drives run_one() and
  /// run_until_idle(), and the order of events depends only on the calls and the delay model.
  /// true: one executor thread runs tasks as they come; wait with wait_idle().
  bool threaded = false;
  /// Per-frame delay in virtual time. Empty: every frame is due at once, so tasks run in the
  /// order they were queued. Whatever the model says, frames of one (src, dst, stream) link
  /// are delivered in the order they were sent.
  delay_fn delay;
};

/// Owns the endpoints and the executor.
///
/// The executor runs tasks in order of (virtual due time, order queued); running a task moves
/// the virtual clock to its due time (it never waits in real time). A frame task delivers one
/// frame: the receiver's sink gets destination() (the payload is copied there, or into scratch
/// space valid until delivered() returns, when it returns nullptr), then delivered(); then the
/// sender's sink gets sent(). The payload is read at delivery time, as a socket reads it when
/// it writes, so a sender that changes a buffer before sent() shows up in the results.
///
/// Failures, modelled on the TCP transport:
///   * kill(r): every other live endpoint's sink gets peer_failed(r, connection_lost "rank r
///     was killed ..."), and r's own sink gets peer_failed(p, ...) for every other live p (its
///     connections broke too), so every op on every rank can end; only then are r's queued
///     frames released (sent() on r's sink). Frames to r are released undelivered.
///   * a frame that fails wire::decode (wrong job, length over max_payload, not a data frame)
///     is released undelivered and the receiver gets peer_failed(src, protocol ...).
///   * endpoint close(): no sink call of that endpoint happens afterwards; frames to it are
///     released undelivered, frames it had queued are still delivered. No one is notified.
///
/// Thread safety: post(), kill(), killed(), queued(), now() and close() from any thread.
/// send() and cancel() on the executor, i.e. inside a task, or, in deterministic mode, on the
/// one thread that drives the executor. run_one()/run_until_idle() only in deterministic mode,
/// from one thread; wait_idle() only in threaded mode. Sinks must outlive the fabric's use of
/// them: stop() (or destroy) the fabric before destroying the sinks.
class local_fabric {
 public:
  explicit local_fabric(fabric_options opts);
  ~local_fabric();
  local_fabric(const local_fabric&) = delete;
  local_fabric& operator=(const local_fabric&) = delete;

  int size() const;
  int num_streams() const;
  /// Rank r's endpoint, valid as long as the fabric.
  transport& endpoint(int rank);

  /// Deterministic mode: runs the next task on the calling thread; false when none is queued.
  bool run_one();
  /// Deterministic mode: runs tasks (which may queue more) until none is queued, or
  /// `max_tasks` have run; returns how many ran.
  std::size_t run_until_idle(std::size_t max_tasks = std::numeric_limits<std::size_t>::max());
  /// Threaded mode: waits until nothing is queued or running; false when `timeout` passed first.
  bool wait_idle(std::chrono::milliseconds timeout);
  /// Ends the executor thread (threaded mode) and drops every queued task; idempotent.
  void stop();

  /// Kills rank r as if its process died (see above). Takes effect before any task queued so
  /// far runs; idempotent.
  void kill(int rank);
  /// True once the kill of `rank` has taken effect.
  bool killed(int rank) const;
  /// Tasks queued and not yet run.
  std::size_t queued() const;
  /// The virtual clock: the due time of the latest task run.
  std::chrono::nanoseconds now() const;
  /// Frames handed to a receiving sink so far.
  uint64_t frames_delivered() const;

  struct state;  ///< defined in the .cpp

 private:
  std::unique_ptr<state> s_;
};

}  // namespace chorus::local
