// The sender: one actor per stream. Receives chunk_work (from fusion, or stolen from a
// sibling), chunk_ran (from the data plane through completion_router) and the steal_* messages;
// sends chunk_done to completion. It keeps a short deque of chunks, runs at most
// max_in_flight of them at once on its stream, and counts bytes and busy time.
//
// Work stealing: a sender that has nothing queued and a free slot asks every sibling how many
// chunks wait in its deque (steal_request / steal_offer), then takes the tail of the fullest
// (steal_take / steal_reply). Frames are routed by sequence, so which stream runs a chunk is a
// purely local choice. It skips the round when the senders' shared count of queued chunks
// (chunk_runner::queued_anywhere, a relaxed atomic hint) is zero: an isolated chunk then ends
// without a message between senders.
//
// Deadlock freedom. A chunk ends only when every rank has started it, so the danger is a
// chunk that some rank never starts. Invariant, on every rank:
// "Before" is runs_before (protocol.hpp: larger priority, then lower sequence), a total order
// that is the same on every rank. Invariant, on every rank:
//   (1) fusion hands out what waits there in that order, and always the chunk that runs before
//       every handed-out unfinished one (fusion_actor.hpp);
//   (2) every deque is kept in that order, and a sender starts the head of its deque when it
//       has a free slot, or — even with no free slot — when the head runs before every chunk
//       it has in flight in a slot (direct chunks, below, hold none).
// Take s, the first in that order of the chunks unfinished on some rank and planned on some
// rank. Every rank plans the same batches, so s gets planned everywhere; on each rank every
// handed-out unfinished chunk comes after s, so (1) hands s out, and it heads its deque and
// runs before anything in flight, so (2) starts it at once. Every rank starts s; the data
// plane keeps early frames, so s ends. Each chunk ends in turn (a later batch may bring
// chunks that run before it, but a step brings finitely many). In-flight chunks per sender
// exceed max_in_flight only by such first-in-order starts.
//
// Direct chunks (chunk_algo::mailbox_allreduce) take no slot and start as soon as they head
// the deque: they wait for their turn in the direct queue (mailbox_queue.hpp), which runs them
// one at a time in fusion's order, not on this stream, and ends each without waiting for any
// stream's chunk. Fusion hands them all to stream 0, they are never stolen, and the stream
// board (which paces streams) never sees them.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include <caf/all.hpp>

#include "actors/chunk_runner.hpp"
#include "actors/protocol.hpp"

namespace chorus {

struct sender_config {
  int stream = 0;
  std::shared_ptr<chunk_runner> runner;
  std::size_t max_in_flight = 2;
  bool steal = true;           ///< off: never ask siblings for work (benchmarks, tests)
  bool record_starts = false;  ///< keep the start order in sender_state::started (tests)
};

struct sender_state {
  sender_config cfg;
  sender_wiring wired;
  std::deque<chunk_work> queue;             ///< not started, in runs_before order
  std::map<uint64_t, chunk_work> in_flight; ///< started, by sequence
  std::size_t direct_in_flight = 0;         ///< of which direct chunks (they take no slot)
  // steal round in progress (as thief)
  bool stealing = false;
  uint64_t round = 0;
  std::size_t offers_left = 0;
  int best_victim = -1;
  std::size_t best_queued = 0;
  // counters
  stream_stats stats;
  steady_time busy_since{};
  std::vector<uint64_t> started;            ///< start order (only with cfg.record_starts)
  bool active = true;                       ///< autotune: false while this stream is not in use (no stealing)
  static inline const char* name = "chorus.sender";
};

caf::behavior sender_actor(caf::stateful_actor<sender_state>* self, sender_config cfg);

}  // namespace chorus
