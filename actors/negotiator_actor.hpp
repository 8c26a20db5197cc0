// The negotiator: one per rank, a thin actor around a negotiation_strategy (gossip or central,
// runtime/negotiation/). It feeds the strategy local tensor_ready events, gossip_bytes from
// peer negotiators (through the control link's edge, actors/control_edge.hpp) and timer ticks,
// and carries out the actions: gossip to peers (on the control link), batch_agreed to fusion,
// op_finished (errors) to the producer, stall warnings to the log. It owns the ops that are
// still being negotiated (by name).
// Failure rules: a spec mismatch ends that op on every rank with the same text; a fatal
// action (stall shutdown, protocol violation), a lost peer (down_msg, or gone_atom from the
// link's edge) or stop_atom ends every op in negotiation and every later one with that error.
// A peer that shuts down first tells the others how many cycles it finished (leaving_atom);
// after its goodbye (left_atom) those cycles still finish here and run what they agree, and
// the error ends what is left once they have (actors/departures.hpp).
// Ops that arrive together go to the strategy together: a tensor_ready is held until the
// messages already in the mailbox have been read (hand_atom to itself), or until the next
// gossip, tick or join, so that gradients produced microseconds apart (a layer's weight and
// bias) share one cycle instead of the second waiting out the cycle time.
// Process sets: an agreed tensor of a set that leaves this rank out goes to fusion as a stand-in
// (handle 0, no buffers), so that this rank plans the batch as its members do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actors/departures.hpp"
#include "actors/protocol.hpp"
#include "runtime/negotiation/strategy.hpp"

namespace chorus {

struct negotiator_config {
  int rank = 0;
  int size = 1;
  std::string strategy = "gossip";
  negotiation::negotiation_options options;
  std::size_t max_samples = 1u << 16;  ///< latency samples kept (the newest)
  /// In-process transport only (actors/in_process_job.hpp): every gossip_bytes reaches its
  /// peer this much later (a modelled one-way link); 0 = sent at once, as the pipeline does.
  std::chrono::microseconds link_latency{0};
  /// Called once, when negotiation first stops because a peer was lost (its control connection
  /// broke, or a peer relayed such a loss); `why` names the rank that was lost. The pipeline
  /// breaks the data plane with it, so that this rank's peers hear the origin, not a goodbye.
  std::function<void(const status&)> on_peer_lost;
  /// The pipeline's control link (actors/control_edge.hpp): when set, every message to a peer
  /// is written on it by rank (false: that peer's connection is closed, and its loss arrives
  /// from the edge), and every peer counts as reachable from the start: the link was connected
  /// with the data plane. peers_connected is then unused. Unset (in-process jobs): gossip_bytes,
  /// gone_atom and leaving_atom go straight to the peer negotiators that peers_connected names.
  std::function<bool(int to, control_kind kind, int origin, std::span<const uint8_t> data)> send_control;
  /// With send_control: the largest message the link carries (0: no limit). A gossip over it
  /// cannot reach its peer, which would wait for it forever; instead the job stops, naming
  /// this rank, the peer and the sizes, on every rank.
  std::size_t max_control_bytes = 0;
};

struct negotiator_state {
  negotiator_config cfg;
  std::unique_ptr<negotiation::negotiation_strategy> strategy;
  negotiator_wiring wired;
  std::vector<caf::actor> peers;                       ///< by rank; empty until peers_connected
  std::vector<negotiation::outgoing_message> unsent;   ///< produced before the destination's handle was known
  bool connected = false;                              ///< a handle for every peer
  std::unordered_map<std::string, op_ref> pending;     ///< ops in negotiation, by name
  std::vector<std::string> arrived;                    ///< of those, not handed to the strategy yet (a hand_atom is queued)
  std::optional<negotiation::time_point> timer_at;     ///< the earliest tick already scheduled
  status failed;                                       ///< not ok: negotiation has stopped
  bool stopped = false;                                ///< stop_atom arrived (shutdown of this rank)
  bool joining = false;                                ///< join_atom arrived, join_done not yet
  departures departed;                                 ///< peers that left cleanly, and the cycles that still run
  std::vector<uint32_t> samples_us;                    ///< enqueue → agreed, ring buffer
  std::size_t next_sample = 0;
  negotiation_stats stats;
  static inline const char* name = "chorus.negotiator";
};

caf::behavior negotiator_actor(caf::stateful_actor<negotiator_state>* self, negotiator_config cfg);

/// p50/p99 of the latency samples, in µs (0 when there are none).
negotiation_stats summarize(const negotiator_state& s);

}  // namespace chorus
