// The Chrome trace writer (timeline.hpp).
#include "telemetry/trace/timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "telemetry/trace/json.hpp"

namespace chorus::telemetry::trace {

namespace {

constexpr int tid_negotiation = 1, tid_fusion = 2, tid_ops = 3, tid_stream0 = 100;

class writer {
 public:
  writer(std::ostream& out, int64_t origin_ns) : out_(out), origin_(origin_ns) {}

  std::string ts(const trace_file& f, int64_t t_ns) const {
    return json::number(static_cast<double>(f.wall_ns(t_ns) - origin_) / 1e3);
  }
  void event(const std::string& body) {
    out_ << (n_ ? ",\n" : "\n") << "{" << body << "}";
    ++n_;
  }
  void meta(int pid, int tid, const char* what, const std::string& name) {
    event(std::string("\"name\":\"") + what + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
          ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + json::quote(name) + "}");
  }
  void span(const trace_file& f, int tid, const std::string& name, const char* cat, int64_t from, int64_t to,
            const std::string& args) {
    event("\"name\":" + json::quote(name) + ",\"cat\":\"" + cat + "\",\"ph\":\"X\",\"pid\":" +
          std::to_string(f.header.rank) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + ts(f, from) +
          ",\"dur\":" + json::number(static_cast<double>(std::max<int64_t>(0, to - from)) / 1e3) + ",\"args\":{" + args +
          "}");
  }
  void instant(const trace_file& f, int tid, const std::string& name, const char* cat, int64_t at,
               const std::string& args) {
    event("\"name\":" + json::quote(name) + ",\"cat\":\"" + cat + "\",\"ph\":\"i\",\"s\":\"t\",\"pid\":" +
          std::to_string(f.header.rank) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + ts(f, at) + ",\"args\":{" +
          args + "}");
  }
  void async(const trace_file& f, const char* ph, uint64_t handle, const std::string& name, int64_t at,
             const std::string& args) {
    char id[40];
    std::snprintf(id, sizeof id, "\"0x%x-%llx\"", static_cast<unsigned>(f.header.rank),
                  static_cast<unsigned long long>(handle));
    event("\"name\":" + json::quote(name) + ",\"cat\":\"op\",\"ph\":\"" + ph + "\",\"id\":" + id +
          ",\"pid\":" + std::to_string(f.header.rank) + ",\"tid\":" + std::to_string(tid_ops) + ",\"ts\":" + ts(f, at) +
          ",\"args\":{" + args + "}");
  }
  std::size_t count() const { return n_; }

 private:
  std::ostream& out_;
  int64_t origin_;
  std::size_t n_ = 0;
};

std::string names_arg(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json::quote(v[i]);
  return out + "]";
}

void write_rank(writer& w, const trace_file& f) {
  int pid = f.header.rank;
  w.meta(pid, 0, "process_name", "rank " + std::to_string(pid));
  w.meta(pid, tid_negotiation, "thread_name", "negotiation");
  w.meta(pid, tid_fusion, "thread_name", "fusion");
  w.meta(pid, tid_ops, "thread_name", "ops");
  std::set<int> streams;
  // Chunk times by sequence, for the bucket spans.
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> chunk_times;
  for (const auto& r : f.records)
    if (r.kind == record_kind::chunk_end) chunk_times[r.sequence] = {r.started_ns, r.t_ns};
  for (const auto& r : f.records) {
    switch (r.kind) {
      case record_kind::cycle:
        w.span(f, tid_negotiation, "cycle " + std::to_string(r.cycle), "negotiation", r.started_ns, r.t_ns,
               "\"cycle\":" + std::to_string(r.cycle) + ",\"messages_sent\":" + std::to_string(r.count) +
                   ",\"messages_received\":" + std::to_string(r.count2));
        break;
      case record_kind::agreed:
        w.instant(f, tid_negotiation, "agreed " + std::to_string(r.names.size()), "negotiation", r.t_ns,
                  "\"cycle\":" + std::to_string(r.cycle) + ",\"tensors\":" + names_arg(r.names));
        break;
      case record_kind::stall:
        w.instant(f, tid_negotiation, "stall", "negotiation", r.t_ns,
                  "\"tensor\":" + json::quote(r.names.empty() ? "" : r.names[0]));
        break;
      case record_kind::error:
        w.instant(f, tid_negotiation, "error " + r.text, "error", r.t_ns, "\"message\":" + json::quote(r.result.message()));
        break;
      case record_kind::bucket: {
        int64_t from = r.t_ns, to = r.t_ns;
        bool seen = false;
        for (uint64_t s = r.sequence; s < r.sequence + r.count; ++s)
          if (auto it = chunk_times.find(s); it != chunk_times.end()) {
            from = seen ? std::min(from, it->second.first) : it->second.first;
            to = seen ? std::max(to, it->second.second) : it->second.second;
            seen = true;
          }
        w.span(f, tid_fusion, "bucket " + std::to_string(r.bucket) + " (" + r.text + ", " +
                                  std::to_string(r.names.size()) + " tensors)",
               "fusion", from, to,
               "\"cycle\":" + std::to_string(r.cycle) + ",\"bytes\":" + std::to_string(r.bytes) +
                   ",\"chunks\":" + std::to_string(r.count) + ",\"in_place\":" + (r.in_place ? "true" : "false") +
                   ",\"tensors\":" + names_arg(r.names));
        break;
      }
      case record_kind::chunk_end:
        if (streams.insert(r.peer).second)
          w.meta(pid, tid_stream0 + r.peer, "thread_name", "stream " + std::to_string(r.peer));
        w.span(f, tid_stream0 + r.peer, "chunk " + std::to_string(r.sequence & ((uint64_t{1} << 62) - 1)), "chunk",
               r.started_ns, r.t_ns,
               "\"sequence\":" + std::to_string(r.sequence) + ",\"bytes\":" + std::to_string(r.bytes) +
                   ",\"ok\":" + (r.result.ok() ? "true" : "false"));
        break;
      case record_kind::steal:
        if (streams.insert(r.peer).second)
          w.meta(pid, tid_stream0 + r.peer, "thread_name", "stream " + std::to_string(r.peer));
        w.instant(f, tid_stream0 + r.peer, "steal from " + std::to_string(r.victim), "chunk", r.t_ns,
                  "\"sequence\":" + std::to_string(r.sequence));
        break;
      case record_kind::enqueue:
        w.async(f, "b", r.handle, r.spec.name, r.t_ns, "\"collective\":" + json::quote(name_of(r.spec.kind)));
        break;
      case record_kind::callback:
        w.async(f, "e", r.handle, r.spec.name, r.t_ns,
                "\"ok\":" + std::string(r.result.ok() ? "true" : "false") +
                    (r.result.ok() ? "" : ",\"error\":" + json::quote(r.result.message())));
        break;
      default: break;
    }
  }
}

}  // namespace

timeline_stats write_timeline(const std::vector<trace_file>& ranks, std::ostream& out) {
  int64_t origin = INT64_MAX;
  for (const auto& f : ranks) {
    origin = std::min(origin, f.header.wall_ns);
    for (const auto& r : f.records) origin = std::min(origin, f.wall_ns(r.t_ns));
  }
  if (origin == INT64_MAX) origin = 0;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  writer w(out, origin);
  for (const auto& f : ranks) write_rank(w, f);
  out << "\n]}\n";
  return {w.count()};
}

}  // namespace chorus::telemetry::trace
