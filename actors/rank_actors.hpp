// The actors of one rank as the pipeline holds them, and their wiring: each actor is told only
// the actors it sends to and where it reports (actors/protocol.hpp, *_wiring).
#pragma once

#include <memory>
#include <vector>

#include "actors/protocol.hpp"

namespace chorus {

struct rank_actors {
  caf::actor producer;
  caf::actor negotiator;
  caf::actor fusion;
  caf::actor completion;
  std::vector<caf::actor> senders;  ///< by stream
  caf::actor autotuner;             ///< invalid unless CHORUS_AUTOTUNE=1
  std::shared_ptr<telemetry::observer> observer;  ///< the rank's telemetry; null when off
  std::shared_ptr<stream_board> board;            ///< placement by stream speed; null: round-robin
};

/// Sends every actor of `a` its wiring.
void wire_actors(const rank_actors& a);

}  // namespace chorus
