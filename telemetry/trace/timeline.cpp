// The Chrome trace writer (timeline.hpp).
#include "telemetry/trace/timeline.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "telemetry/trace/json.hpp"

namespace chorus::telemetry::trace {

namespace {

constexpr int tid_negotiation = 1, tid_fusion = 2, tid_ops = 3, tid_stream0 = 100, tid_c10d0 = 1000;

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
  /// An instant of global scope (a line across every track), Horovod's cycle marks.
  void global_instant(const trace_file& f, const std::string& name, const char* cat, int64_t at,
                      const std::string& args) {
    event("\"name\":" + json::quote(name) + ",\"cat\":\"" + cat + "\",\"ph\":\"i\",\"s\":\"g\",\"pid\":" +
          std::to_string(f.header.rank) + ",\"tid\":" + std::to_string(tid_negotiation) + ",\"ts\":" + ts(f, at) +
          ",\"args\":{" + args + "}");
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

using chunk_time_map = std::unordered_map<uint64_t, std::pair<int64_t, int64_t>>;

/// One operation's phases on one rank (steady ns of the file; -1: not seen).
struct op_phases {
  collective_kind kind = collective_kind::allreduce;
  int64_t enqueued = -1;
  int64_t agreed = -1;   // its batch was agreed
  int64_t started = -1;  // its bucket's first chunk started
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

/// Matches the records of one rank to operations (by handle): the agreed batch that holds an
/// operation's name while it is pending, and the bucket of that name and cycle. Records of
/// different threads reach the file in flush order, not time order, so this walks them by time.
/// Only operations whose enqueue is in the file are returned.
std::unordered_map<uint64_t, op_phases> match_phases(const trace_file& f, const chunk_time_map& chunk_times) {
  std::vector<const trace_record*> by_time;
  for (const auto& r : f.records)
    if (r.kind == record_kind::enqueue || r.kind == record_kind::agreed || r.kind == record_kind::callback)
      by_time.push_back(&r);
  std::stable_sort(by_time.begin(), by_time.end(),
                   [](const trace_record* a, const trace_record* b) { return a->t_ns < b->t_ns; });
  std::unordered_map<uint64_t, op_phases> ops;
  std::unordered_map<std::string, uint64_t> pending;         // name -> handle (names are unique while pending)
  std::map<std::pair<std::string, uint64_t>, uint64_t> agreed_in;  // (name, cycle) -> handle
  for (const auto* r : by_time) {
    switch (r->kind) {
      case record_kind::enqueue:
        ops[r->handle].kind = r->spec.kind;
        ops[r->handle].enqueued = r->t_ns;
        pending[r->spec.name] = r->handle;
        break;
      case record_kind::agreed:
        for (const auto& name : r->names)
          if (auto it = pending.find(name); it != pending.end() && ops[it->second].agreed < 0) {
            ops[it->second].agreed = r->t_ns;
            agreed_in[{name, r->cycle}] = it->second;
          }
        break;
      case record_kind::callback:
        if (auto it = pending.find(r->spec.name); it != pending.end() && it->second == r->handle) pending.erase(it);
        break;
      default: break;
    }
  }
  for (const auto& r : f.records) {
    if (r.kind != record_kind::bucket) continue;
    int64_t first = -1;
    for (uint64_t s = r.sequence; s < r.sequence + r.count; ++s)
      if (auto it = chunk_times.find(s); it != chunk_times.end())
        first = first < 0 ? it->second.first : std::min(first, it->second.first);
    if (first < 0) continue;
    for (const auto& name : r.names)
      if (auto it = agreed_in.find({name, r.cycle}); it != agreed_in.end()) ops[it->second].started = first;
  }
  return ops;
}

/// The phases of one ended operation, nested in its async span (same id): NEGOTIATE_<KIND>,
/// QUEUE, <KIND>, as far as the records tell.
void write_phases(writer& w, const trace_file& f, const trace_record& callback, const op_phases& p) {
  const int64_t enqueued = p.enqueued;
  std::string kind = upper(name_of(p.kind));
  auto phase = [&](const std::string& name, int64_t from, int64_t to) {
    w.async(f, "b", callback.handle, name, from, "");
    w.async(f, "e", callback.handle, name, std::max(from, to), "");
  };
  int64_t end = callback.t_ns;
  if (p.agreed < 0) {  // ended before agreement (a mismatch, shutdown)
    phase("NEGOTIATE_" + kind, enqueued, end);
    return;
  }
  phase("NEGOTIATE_" + kind, enqueued, p.agreed);
  if (p.started >= 0) {
    phase("QUEUE", p.agreed, p.started);
    phase(kind, p.started, end);
  } else {
    phase(kind, p.agreed, end);
  }
}

void write_rank(writer& w, const trace_file& f, const timeline_options& options) {
  int pid = f.header.rank;
  w.meta(pid, 0, "process_name", "rank " + std::to_string(pid));
  w.meta(pid, tid_negotiation, "thread_name", "negotiation");
  w.meta(pid, tid_fusion, "thread_name", "fusion");
  w.meta(pid, tid_ops, "thread_name", "ops");
  std::set<int> streams;
  std::map<std::string, int> groups;  // torch.distributed groups' calls: a thread per group
  // Chunk times by sequence, for the bucket spans.
  chunk_time_map chunk_times;
  for (const auto& r : f.records)
    if (r.kind == record_kind::chunk_end) chunk_times[r.sequence] = {r.started_ns, r.t_ns};
  // By handle, from the whole file: a record's place in the file is not its time order.
  auto phases = match_phases(f, chunk_times);
  for (const auto& r : f.records) {
    switch (r.kind) {
      case record_kind::cycle:
        if (options.mark_cycles)
          w.global_instant(f, "CYCLE_START", "cycle", r.started_ns, "\"cycle\":" + std::to_string(r.cycle));
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
      case record_kind::compressed:
        if (streams.insert(r.peer).second)
          w.meta(pid, tid_stream0 + r.peer, "thread_name", "stream " + std::to_string(r.peer));
        w.instant(f, tid_stream0 + r.peer, "compressed", "chunk", r.t_ns,
                  "\"raw_bytes\":" + std::to_string(r.bytes) + ",\"wire_bytes\":" + std::to_string(r.count));
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
      case record_kind::call: {
        auto [it, fresh] = groups.emplace(r.group, static_cast<int>(groups.size()));
        const int tid = tid_c10d0 + it->second;
        if (fresh) w.meta(pid, tid, "thread_name", "c10d group '" + r.group + "'");
        w.span(f, tid, "c10d." + r.text + "#" + std::to_string(r.sequence), "c10d", r.started_ns, r.t_ns,
               "\"bytes\":" + std::to_string(r.bytes) + ",\"ok\":" + (r.result.ok() ? "true" : "false") +
                   (r.result.ok() ? "" : ",\"error\":" + json::quote(r.result.message())));
        break;
      }
      case record_kind::callback: {
        auto p = phases.find(r.handle);
        if (p == phases.end()) break;  // enqueued before the recording started: no span
        write_phases(w, f, r, p->second);
        w.async(f, "e", r.handle, r.spec.name, r.t_ns,
                "\"ok\":" + std::string(r.result.ok() ? "true" : "false") +
                    (r.result.ok() ? "" : ",\"error\":" + json::quote(r.result.message())));
        break;
      }
      default: break;
    }
  }
}

}  // namespace

timeline_stats write_timeline(const std::vector<trace_file>& ranks, std::ostream& out,
                              const timeline_options& options) {
  int64_t origin = INT64_MAX;
  for (const auto& f : ranks) {
    origin = std::min(origin, f.header.wall_ns);
    for (const auto& r : f.records) origin = std::min(origin, f.wall_ns(r.t_ns));
  }
  if (origin == INT64_MAX) origin = 0;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  writer w(out, origin);
  for (const auto& f : ranks) write_rank(w, f, options);
  out << "\n]}\n";
  return {w.count()};
}

}  // namespace chorus::telemetry::trace
