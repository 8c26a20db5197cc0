// The control edge: where the control link (runtime/transport/tcp/control_link.hpp) meets the
// negotiator. Gossip travels between processes as frames on the link's authenticated TCP
// connections and becomes an actor message only here, on the link's thread, so the negotiator
// stays an ordinary actor:
//   peer's frame gossip         → gossip_bytes
//   peer's frame gone (origin)  → (gone_atom, origin, why): the peer lost rank `origin`
//   peer's frame leaving        → (leaving_atom, peer, cycles): it shuts down after that cycle
//   the peer's goodbye          → (left_atom, peer, why): it shut down; what needs it fails
//                                 once the cycles it finished are done here (departures.hpp)
//   the connection broke        → (gone_atom, peer, why): the peer is lost (peer_lost)
// The link keeps the order in which one peer sent, so a peer's last gossip reaches the
// negotiator before its goodbye. It is the pipeline's one control plane: no actor message
// crosses processes.
#pragma once

#include <memory>

#include <caf/all.hpp>

#include "actors/negotiator_actor.hpp"
#include "runtime/transport/tcp/control_link.hpp"

namespace chorus {

/// Handlers that turn what `link` receives into messages to `negotiator` (table above).
tcp::control_link::handlers control_edge_handlers(caf::actor negotiator);

/// What negotiator_config::send_control is for a pipeline on `link` (the link outlives it).
decltype(negotiator_config::send_control) control_edge_sender(std::shared_ptr<tcp::control_link> link);

}  // namespace chorus
