// The control edge (control_edge.hpp).
#include "actors/control_edge.hpp"

#include <string>

#include "runtime/core/log.hpp"

namespace chorus {

tcp::control_link::handlers control_edge_handlers(caf::actor negotiator) {
  tcp::control_link::handlers h;
  h.on_message = [negotiator](int peer, uint8_t kind, int32_t origin, std::vector<uint8_t> data) {
    switch (static_cast<control_kind>(kind)) {
      case control_kind::gossip:
        caf::anon_send(negotiator, gossip_bytes{std::move(data)});
        return;
      case control_kind::gone:
        caf::anon_send(negotiator, gone_atom::value, static_cast<int>(origin), std::string(data.begin(), data.end()));
        return;
      case control_kind::leaving:
        if (auto cycles = leaving_cycles(data)) {
          caf::anon_send(negotiator, leaving_atom::value, peer, *cycles);
          return;
        }
        break;
    }
    // An authenticated peer that sends what no Chorus rank sends runs another protocol: lose it.
    caf::anon_send(negotiator, gone_atom::value, peer,
                   "rank " + std::to_string(peer) + " sent an unknown control message (kind " +
                       std::to_string(static_cast<int>(kind)) + "); is it running another Chorus version?");
  };
  h.on_closed = [negotiator](int peer, const status& why, bool clean) {
    // `why` names the peer: "rank P left the job (it shut down)", "rank P's control connection ..."
    if (clean)
      caf::anon_send(negotiator, left_atom::value, peer, why.message());
    else
      caf::anon_send(negotiator, gone_atom::value, peer, why.message());
  };
  return h;
}

decltype(negotiator_config::send_control) control_edge_sender(std::shared_ptr<tcp::control_link> link) {
  return [link = std::move(link)](int to, control_kind kind, int origin, std::span<const uint8_t> data) {
    return link->send(to, static_cast<uint8_t>(kind), origin, data);
  };
}

}  // namespace chorus
