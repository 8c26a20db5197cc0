#include "actors/rank_actors.hpp"

namespace chorus {

void wire_actors(const rank_actors& a) {
  caf::anon_send(a.producer, producer_wiring{a.negotiator, a.observer});
  caf::anon_send(a.negotiator, negotiator_wiring{a.producer, a.fusion, a.autotuner, a.observer});
  caf::anon_send(a.fusion, fusion_wiring{a.completion, a.senders, a.observer, a.board});
  for (const auto& s : a.senders) caf::anon_send(s, sender_wiring{a.completion, a.senders, a.observer, a.board});
  caf::anon_send(a.completion, completion_wiring{a.producer, a.fusion, a.autotuner, a.observer});
  if (a.autotuner) caf::anon_send(a.autotuner, autotuner_wiring{a.negotiator, a.fusion, a.senders, a.observer});
}

}  // namespace chorus
