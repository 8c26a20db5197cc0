// Starts a communicator's own chunk ops (its allreduce, broadcast, ... called directly rather
// than through the actor pipeline) on the streams by observed rate. Chunks wait in sequence
// order; the oldest goes to the stream expected to finish it first (stream_board::choose) once
// that stream runs fewer than `per_stream` chunks, and waits for that slot otherwise. A chunk is
// bound to a stream only when it starts, so no work waits behind a slow connection while fast
// ones idle: the fast streams keep taking the next chunks, the slow one only what it can finish
// as early. Frames are routed by (sequence, step), so each rank chooses alone.
// Deadlock freedom, as for the sender actors (actors/sender_actor.hpp): chunks start in
// sequence order, and a chunk older than every running one starts even without a free slot; the
// oldest unfinished chunk anywhere is then started on every rank.
// I/O thread only (submit, and the engine's callbacks). A chunk's end may be reported from deep
// inside the transport (a connection's write completion); the next chunks start from a fresh
// handler (`defer`, the transport's post), never inside that callback.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/stream_board.hpp"

namespace chorus {

class chunk_scheduler {
 public:
  using make_fn = std::function<std::unique_ptr<chunk_op>(int stream)>;
  using defer_fn = std::function<void(std::function<void()>)>;
  /// `per_stream` >= 1: chunks one stream runs at once (CHORUS_CHUNKS_IN_FLIGHT). `defer` runs
  /// a function later on the I/O thread (transport::post).
  chunk_scheduler(engine& e, std::shared_ptr<stream_board> board, std::size_t per_stream, defer_fn defer);
  /// Queues chunk `sequence` of `bytes`; `make(stream)` builds its op when it starts there;
  /// `done` runs once, on the I/O thread, when the engine ends it.
  void submit(uint64_t sequence, std::size_t bytes, make_fn make, engine::done_fn done);
  std::size_t waiting() const { return waiting_.size(); }

 private:
  struct pending {
    std::size_t bytes;
    make_fn make;
    engine::done_fn done;
  };
  void pump();

  engine& e_;
  std::shared_ptr<stream_board> board_;
  std::size_t per_stream_;
  defer_fn defer_;
  bool pump_posted_ = false;
  std::map<uint64_t, pending> waiting_;
  std::set<uint64_t> running_;
  std::vector<std::size_t> running_on_;
  bool pumping_ = false;
};

}  // namespace chorus
