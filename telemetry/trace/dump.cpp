// Records as JSON lines.
#include "telemetry/trace/dump.hpp"

#include <span>

#include "runtime/negotiation/message.hpp"
#include "telemetry/trace/json.hpp"

namespace chorus::telemetry::trace {

namespace {

std::string names_json(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json::quote(v[i]);
  return out + "]";
}

template <class T>
std::string ints_json(const std::vector<T>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string spec_json(const tensor_spec& s) {
  return "\"name\":" + json::quote(s.name) + ",\"collective\":" + json::quote(name_of(s.kind)) +
         ",\"dtype\":" + json::quote(name_of(s.type)) + ",\"shape\":" + ints_json(s.shape) +
         ",\"op\":" + json::quote(name_of(s.op)) + ",\"root\":" + std::to_string(s.root) +
         ",\"device\":" + json::quote(name_of(s.device)) + ",\"process_set\":" + std::to_string(s.process_set) +
         ",\"priority\":" + std::to_string(s.priority);
}

std::string status_json(const status& s) {
  if (s.ok()) return "\"ok\":true";
  return std::string("\"ok\":false,\"error\":") + json::quote(to_string(s.code())) + ",\"message\":" +
         json::quote(s.message());
}

std::string message_json(const std::vector<uint8_t>& payload) {
  auto m = negotiation::decode_message(std::as_bytes(std::span(payload)));
  if (!m) return "\"message\":null,\"decode_error\":" + json::quote(m.error().message());
  static const char* kinds[] = {"gossip", "report", "poll", "answer"};
  auto k = static_cast<std::size_t>(m->kind);
  std::vector<std::string> announced;
  for (const auto& a : m->announced) announced.push_back(a.spec.name);
  return std::string("\"message\":{\"type\":") + json::quote(k < 4 ? kinds[k] : "unknown") +
         ",\"cycle\":" + std::to_string(m->cycle) + ",\"round\":" + std::to_string(m->round) +
         ",\"from\":" + std::to_string(m->from) + ",\"ready\":" + ints_json(m->ready_and.to_vector()) +
         ",\"announced\":" + names_json(announced) + (m->shutdown ? ",\"shutdown\":true" : "") + "}";
}

}  // namespace

std::string to_json(const trace_file& f, const trace_record& r) {
  std::string o = "{\"file\":" + json::quote(f.path) + ",\"rank\":" + std::to_string(f.header.rank) +
                  ",\"offset\":" + std::to_string(r.offset) + ",\"t_us\":" + json::number(static_cast<double>(r.t_ns) / 1e3) +
                  ",\"kind\":" + json::quote(name_of(r.kind));
  auto us = [](int64_t ns) { return json::number(static_cast<double>(ns) / 1e3); };
  switch (r.kind) {
    case record_kind::tunables:
      o += ",\"fusion_threshold\":" + std::to_string(r.tuning.fusion_threshold) +
           ",\"chunk_bytes\":" + std::to_string(r.tuning.chunk_bytes) + ",\"streams\":" +
           std::to_string(r.tuning.streams) + ",\"cycle_time_us\":" + std::to_string(r.tuning.cycle_time.count()) +
           ",\"in_place_bytes\":" + std::to_string(r.tuning.in_place_bytes);
      break;
    case record_kind::autotune:
      o += ",\"cycle\":" + std::to_string(r.autotune.cycle) + ",\"window\":" + std::to_string(r.autotune.window) +
           ",\"score\":" + json::number(r.autotune.score) + ",\"sample\":" + std::to_string(r.autotune.sample_index) +
           ",\"switched\":" + (r.autotune.switched ? "true" : "false") + ",\"fusion_threshold\":" +
           std::to_string(r.tuning.fusion_threshold) + ",\"chunk_bytes\":" + std::to_string(r.tuning.chunk_bytes) +
           ",\"streams\":" + std::to_string(r.tuning.streams) + ",\"cycle_time_us\":" +
           std::to_string(r.tuning.cycle_time.count()) + ",\"in_place_bytes\":" + std::to_string(r.tuning.in_place_bytes);
      break;
    case record_kind::enqueue: o += ",\"handle\":" + std::to_string(r.handle) + "," + spec_json(r.spec); break;
    case record_kind::ready:
      o += ",\"handle\":" + std::to_string(r.handle) + "," + spec_json(r.spec) + ",\"cycle\":" + std::to_string(r.cycle);
      break;
    case record_kind::callback:
      o += ",\"handle\":" + std::to_string(r.handle) + "," + spec_json(r.spec) + "," + status_json(r.result) +
           ",\"enqueued_us\":" + us(r.started_ns);
      break;
    case record_kind::gossip_sent:
      o += ",\"to\":" + std::to_string(r.peer) + ",\"bytes\":" + std::to_string(r.payload.size()) + "," +
           message_json(r.payload);
      break;
    case record_kind::gossip_received:
      o += ",\"bytes\":" + std::to_string(r.payload.size()) + "," + message_json(r.payload);
      break;
    case record_kind::cycle:
      o += ",\"cycle\":" + std::to_string(r.cycle) + ",\"messages_sent\":" + std::to_string(r.count) +
           ",\"messages_received\":" + std::to_string(r.count2) + ",\"started_us\":" + us(r.started_ns);
      break;
    case record_kind::agreed:
      o += ",\"cycle\":" + std::to_string(r.cycle) + ",\"names\":" + names_json(r.names) +
           ",\"latency_us\":" + ints_json(r.values);
      break;
    case record_kind::stall:
      o += ",\"name\":" + json::quote(r.names.empty() ? "" : r.names[0]) + ",\"missing_ranks\":" + ints_json(r.values);
      break;
    case record_kind::bucket:
      o += ",\"bucket\":" + std::to_string(r.bucket) + ",\"cycle\":" + std::to_string(r.cycle) +
           ",\"first_sequence\":" + std::to_string(r.sequence) + ",\"chunks\":" + std::to_string(r.count) +
           ",\"bytes\":" + std::to_string(r.bytes) + ",\"in_place\":" + (r.in_place ? "true" : "false") +
           ",\"collective\":" + json::quote(r.text) + ",\"algorithm\":" + json::quote(r.algorithm) +
           ",\"tensors\":" + names_json(r.names);
      break;
    case record_kind::chunk_start:
      o += ",\"stream\":" + std::to_string(r.peer) + ",\"sequence\":" + std::to_string(r.sequence) +
           ",\"bytes\":" + std::to_string(r.bytes);
      break;
    case record_kind::chunk_end:
      o += ",\"stream\":" + std::to_string(r.peer) + ",\"sequence\":" + std::to_string(r.sequence) +
           ",\"bytes\":" + std::to_string(r.bytes) + "," + status_json(r.result) + ",\"started_us\":" + us(r.started_ns);
      break;
    case record_kind::compressed:
      o += ",\"stream\":" + std::to_string(r.peer) + ",\"raw_bytes\":" + std::to_string(r.bytes) +
           ",\"wire_bytes\":" + std::to_string(r.count);
      break;
    case record_kind::direct_path: o += ",\"max_bytes\":" + std::to_string(r.bytes); break;
    case record_kind::call:
      o += ",\"group\":" + json::quote(r.group) + ",\"call\":" + json::quote(r.text) +
           ",\"seq\":" + std::to_string(r.sequence) + ",\"bytes\":" + std::to_string(r.bytes) + "," +
           status_json(r.result) + ",\"started_us\":" + us(r.started_ns);
      break;
    case record_kind::steal:
      o += ",\"thief\":" + std::to_string(r.peer) + ",\"victim\":" + std::to_string(r.victim) +
           ",\"sequence\":" + std::to_string(r.sequence);
      break;
    case record_kind::error: o += ",\"error_kind\":" + json::quote(r.text) + "," + status_json(r.result); break;
    case record_kind::lost: o += ",\"records\":" + std::to_string(r.count); break;
    case record_kind::limit: o += ",\"max_bytes\":" + std::to_string(r.count); break;
    case record_kind::end: o += ",\"records\":" + std::to_string(r.count); break;
    case record_kind::string: break;
  }
  return o + "}";
}

void dump(const trace_file& f, std::ostream& out) {
  for (const auto& r : f.records) out << to_json(f, r) << '\n';
}

}  // namespace chorus::telemetry::trace
