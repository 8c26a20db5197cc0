// How a sender actor runs one chunk: chunk_runner builds the chunk op a chunk_work asks for
// (ring allreduce, recursive doubling, hierarchical allreduce, broadcast, ring or hierarchical
// allgather, ring reduce-scatter, alltoall) on the sender's stream and hands it to the data
// plane. Tests replace it with a runner that holds chunks until told.
// comm_runner's done callbacks run on the data plane's I/O thread; they only ever post an
// actor message (chunk_ran), through a router that shutdown closes before the actors go away.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/protocol.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

class communicator;

class chunk_runner {
 public:
  virtual ~chunk_runner() = default;
  /// Starts `w` on stream `stream`. Exactly one chunk_ran{w.sequence, result} reaches the
  /// sender of `stream` later (from any thread), unless the pipeline shut down meanwhile.
  virtual void run(const chunk_work& w, int stream) = 0;

  /// Chunks waiting (handed out, not started) in the deques of all the senders that share
  /// this runner, as those senders count them. A hint, not state that decides anything: an
  /// idle sender asks its siblings for work (steal_request to each, an offer back from each)
  /// only when it is non-zero, so an isolated chunk costs no steal round. A chunk queued
  /// while a sender decides is picked up by that sender's own deque as before.
  std::atomic<std::size_t>& queued_anywhere() { return queued_; }

 private:
  std::atomic<std::size_t> queued_{0};
};

/// Routes data-plane completions to the sender actors while the pipeline lives. The data
/// plane may hold a callback past the actor system's end; it holds the router, never an actor.
/// Thread-safe: post() from the I/O thread, wire() and close() from the pipeline's owner.
class completion_router {
 public:
  void wire(std::vector<caf::actor> senders);
  /// Sends chunk_ran to the sender of `stream`, unless closed. `job` is the chunk's bucket
  /// (null when none): the data plane's writes to it happen before the sender's handler, an
  /// edge through CAF's mailbox that TSan is told of (runtime/core/tsan_edge.hpp).
  void post(int stream, uint64_t sequence, const status& st, const bucket_job* job);
  /// Drops the actor handles (call while the actor system still lives); later posts do nothing.
  void close();

 private:
  std::mutex mu_;
  std::vector<caf::actor> senders_;
};

/// The real runner over a communicator's data plane.
class comm_runner final : public chunk_runner {
 public:
  comm_runner(communicator& comm, std::shared_ptr<completion_router> router) : comm_(comm), router_(std::move(router)) {}
  void run(const chunk_work& w, int stream) override;
  /// run(), but `done` (any thread, exactly once) gets the outcome instead of the sender.
  void run_then(const chunk_work& w, int stream, std::function<void(const status&)> done);

 private:
  communicator& comm_;
  std::shared_ptr<completion_router> router_;
};

/// Prepares an allgather data chunk once its counts are known: sizes job.gathered, copies
/// this rank's rows in, and returns the element count of every rank (or an error).
result<std::vector<std::size_t>> prepare_gather(bucket_job& job, int rank, int size);

/// What an alltoall data chunk sends and receives, in bytes.
struct alltoall_layout {
  std::vector<byte_range> send;  ///< of this rank's input, by destination rank
  std::vector<byte_range> recv;  ///< of job.gathered, by source rank
};
/// Prepares an alltoall data chunk once every rank's splits are known (job.first_dims, size x
/// size): sizes job.gathered for the rows this rank receives (rank order) and lays out both
/// sides, or returns an error (a bad count, or an earlier local error).
result<alltoall_layout> prepare_alltoall(bucket_job& job, int rank, int size);

}  // namespace chorus
