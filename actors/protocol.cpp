// Registration of every message type of actors/protocol.hpp with the actor system's config;
// runs in every process before the system starts.
#include "actors/protocol.hpp"

namespace chorus {

telemetry::observer& observer_of(const std::shared_ptr<telemetry::observer>& wired) {
  static telemetry::observer ignore_all;
  return wired ? *wired : ignore_all;
}

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<gossip_bytes>("chorus.gossip_bytes");
  cfg.add_message_type<op_enqueued>("chorus.op_enqueued");
  cfg.add_message_type<ops_enqueued>("chorus.ops_enqueued");
  cfg.add_message_type<tensor_ready>("chorus.tensor_ready");
  cfg.add_message_type<peers_connected>("chorus.peers_connected");
  cfg.add_message_type<batch_agreed>("chorus.batch_agreed");
  cfg.add_message_type<op_finished>("chorus.op_finished");
  cfg.add_message_type<ops_finished>("chorus.ops_finished");
  cfg.add_message_type<join_enqueued>("chorus.join_enqueued");
  cfg.add_message_type<join_finished>("chorus.join_finished");
  cfg.add_message_type<bucket_planned>("chorus.bucket_planned");
  cfg.add_message_type<chunk_ended>("chorus.chunk_ended");
  cfg.add_message_type<chunk_work>("chorus.chunk_work");
  cfg.add_message_type<chunk_ran>("chorus.chunk_ran");
  cfg.add_message_type<chunk_done>("chorus.chunk_done");
  cfg.add_message_type<producer_wiring>("chorus.producer_wiring");
  cfg.add_message_type<negotiator_wiring>("chorus.negotiator_wiring");
  cfg.add_message_type<fusion_wiring>("chorus.fusion_wiring");
  cfg.add_message_type<sender_wiring>("chorus.sender_wiring");
  cfg.add_message_type<completion_wiring>("chorus.completion_wiring");
  cfg.add_message_type<autotuner_wiring>("chorus.autotuner_wiring");
  cfg.add_message_type<bucket_finished>("chorus.bucket_finished");
  cfg.add_message_type<window_scored>("chorus.window_scored");
  cfg.add_message_type<window_agreed>("chorus.window_agreed");
  cfg.add_message_type<tunables_pending>("chorus.tunables_pending");
  cfg.add_message_type<tunables_switch>("chorus.tunables_switch");
  cfg.add_message_type<autotune_hold>("chorus.autotune_hold");
  cfg.add_message_type<autotune_windows>("chorus.autotune_windows");
  cfg.add_message_type<autotune_pad>("chorus.autotune_pad");
  cfg.add_message_type<steal_request>("chorus.steal_request");
  cfg.add_message_type<steal_offer>("chorus.steal_offer");
  cfg.add_message_type<steal_take>("chorus.steal_take");
  cfg.add_message_type<steal_reply>("chorus.steal_reply");
  cfg.add_message_type<stream_stats>("chorus.stream_stats");
  cfg.add_message_type<negotiation_stats>("chorus.negotiation_stats");
}

}  // namespace chorus
