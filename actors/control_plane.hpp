// The control plane: negotiators of different ranks reach each other as CAF remote actors over
// CAF's I/O layer (BASP over TCP). Each rank publishes its control gate (actors/control_gate.hpp,
// which lets only messages sealed with the job secret through to the negotiator) on the host
// its data plane listens on, exchanges "ctrl/<rank>" = "host:port" through the job's rendezvous
// store, and connects to every lower rank with a finite deadline. Bulk bytes never travel here.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "runtime/core/status.hpp"

namespace chorus {

class communicator;

/// "host:port" or "[v6]:port" → host (no brackets) and port; false when malformed.
bool split_host_port(const std::string& ep, std::string& host, uint16_t& port);

/// Publishes `gate`, exchanges endpoints, connects to every lower rank within `timeout`.
/// Returns the gates of the lower ranks by rank; the other slots are empty (higher ranks
/// introduce themselves with a sealed hello over the connection they open).
/// Errors: errc::rendezvous (store) or errc::connection_lost naming the rank and address.
result<std::vector<caf::actor>> connect_control_plane(caf::actor_system& sys, communicator& comm,
                                                      const caf::actor& gate, std::chrono::milliseconds timeout);

}  // namespace chorus
