// Starts a communicator's own chunk ops (its allreduce, broadcast, ... called directly rather
// than through the actor pipeline) on the streams by observed rate. Chunks wait in sequence
// order; the oldest goes to the stream expected to finish it first (stream_board::choose) once
// that stream's window has room for it, and waits otherwise. The window is counted in bytes
// (in_flight_window below): a chunk holds the share of a slot it was cut for, so a stream runs
// CHORUS_CHUNKS_IN_FLIGHT flat chunks, or more of the hierarchical allreduce's finer ones
// (hier_chunks in hier_schedule.hpp). A chunk is
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
#include "runtime/config/defaults.hpp"

namespace chorus {

/// How much a stream may run at once: `slots` chunks of `slot_bytes` (CHORUS_CHUNKS_IN_FLIGHT
/// × CHORUS_CHUNK_BYTES), counted in bytes. Each chunk is charged the share of a slot its
/// collective gives it, not its own bytes: flat chunks a whole slot, short tails too, so flat
/// collectives keep exactly `slots` per stream; hierarchical ones less (hier_chunks).
struct in_flight_window {
  std::size_t slots = 2;
  std::size_t slot_bytes = default_chunk_bytes;
  std::size_t bytes() const { return slots * slot_bytes; }
  /// Whether a chunk charged `charge` may start on a stream whose running chunks hold `held`.
  /// An idle stream takes any chunk (one larger than the window runs alone), so does a chunk
  /// older than everything running (deadlock freedom, above).
  bool admits(std::size_t held, std::size_t charge, bool oldest) const {
    return held == 0 || oldest || held + charge <= bytes();
  }
};

class chunk_scheduler {
 public:
  using make_fn = std::function<std::unique_ptr<chunk_op>(int stream)>;
  using defer_fn = std::function<void(std::function<void()>)>;
  /// `window`: what one stream runs at once (slots >= 1). `defer` runs a function later on
  /// the I/O thread (transport::post).
  chunk_scheduler(engine& e, std::shared_ptr<stream_board> board, in_flight_window window, defer_fn defer);
  /// Queues chunk `sequence` of `bytes`, charged `charge` bytes of its stream's window (0: a
  /// whole slot); `make(stream)` builds its op when it starts there; `done` runs once, on the
  /// I/O thread, when the engine ends it.
  void submit(uint64_t sequence, std::size_t bytes, std::size_t charge, make_fn make, engine::done_fn done);
  std::size_t waiting() const { return waiting_.size(); }
  /// Chunks running now (on all streams).
  std::size_t running() const { return running_.size(); }

 private:
  struct pending {
    std::size_t bytes;
    std::size_t charge;
    make_fn make;
    engine::done_fn done;
  };
  void pump();

  engine& e_;
  std::shared_ptr<stream_board> board_;
  in_flight_window window_;
  defer_fn defer_;
  bool pump_posted_ = false;
  std::map<uint64_t, pending> waiting_;
  std::set<uint64_t> running_;
  std::vector<std::size_t> held_on_;  ///< charged bytes running, by stream
  bool pumping_ = false;
};

}  // namespace chorus
