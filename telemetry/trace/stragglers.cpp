// Straggler analysis over the ready and agreed records of every rank (stragglers.hpp).
#include "telemetry/trace/stragglers.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

namespace chorus::telemetry::trace {

namespace {

/// last rank and its lead over the runner-up, among per-rank times
std::pair<int, int64_t> last_of(const std::vector<int64_t>& t) {
  int last = 0;
  for (std::size_t r = 1; r < t.size(); ++r)
    if (t[r] > t[static_cast<std::size_t>(last)]) last = static_cast<int>(r);
  int64_t second = INT64_MIN;
  for (std::size_t r = 0; r < t.size(); ++r)
    if (static_cast<int>(r) != last) second = std::max(second, t[r]);
  return {last, second == INT64_MIN ? 0 : t[static_cast<std::size_t>(last)] - second};
}

std::string ms(int64_t ns) {
  char buf[32];
  if (ns < 1000000)
    std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(ns) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

}  // namespace

straggler_report find_stragglers(const std::vector<trace_file>& ranks) {
  straggler_report out;
  out.ranks = static_cast<int>(ranks.size());
  const std::size_t n = ranks.size();
  if (n == 0) return out;
  // Per rank: name → ready times in order; rank 0 also gives the agreed order and cycles.
  std::vector<std::unordered_map<std::string, std::vector<int64_t>>> ready(n);
  for (std::size_t r = 0; r < n; ++r)
    for (const auto& x : ranks[r].records)
      if (x.kind == record_kind::ready) ready[r][x.spec.name].push_back(ranks[r].wall_ns(x.t_ns));
  std::unordered_map<std::string, std::size_t> occurrence;
  std::map<uint64_t, std::vector<std::vector<int64_t>>> per_cycle;  // cycle → each op's per-rank times
  for (const auto& x : ranks[0].records) {
    if (x.kind != record_kind::agreed) continue;
    for (const auto& name : x.names) {
      std::size_t k = occurrence[name]++;
      std::vector<int64_t> t(n);
      bool complete = true;
      for (std::size_t r = 0; r < n && complete; ++r) {
        auto it = ready[r].find(name);
        complete = it != ready[r].end() && k < it->second.size();
        if (complete) t[r] = it->second[k];
      }
      if (!complete) continue;
      auto [last, by] = last_of(t);
      out.tensors.push_back({name, x.cycle, last, by});
      per_cycle[x.cycle].push_back(std::move(t));
    }
  }
  for (auto& [cycle, ops] : per_cycle) {
    std::vector<int64_t> latest(n, INT64_MIN);
    for (const auto& t : ops)
      for (std::size_t r = 0; r < n; ++r) latest[r] = std::max(latest[r], t[r]);
    auto [last, by] = last_of(latest);
    out.cycles.push_back({"", cycle, last, by});
  }
  out.summary.resize(n);
  for (std::size_t r = 0; r < n; ++r) out.summary[r].rank = static_cast<int>(r);
  if (n > 1) {
    for (const auto& e : out.tensors) {
      auto& s = out.summary[static_cast<std::size_t>(e.last_rank)];
      ++s.tensors_last;
      s.total_ns += e.by_ns;
      if (e.by_ns > s.max_ns || s.max_name.empty()) s.max_ns = e.by_ns, s.max_name = e.name, s.max_cycle = e.cycle;
    }
    for (const auto& e : out.cycles) ++out.summary[static_cast<std::size_t>(e.last_rank)].cycles_last;
  }
  std::stable_sort(out.summary.begin(), out.summary.end(), [](const rank_summary& a, const rank_summary& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.tensors_last > b.tensors_last;
  });
  return out;
}

void print(const straggler_report& r, std::ostream& out) {
  out << "stragglers: " << r.ranks << " ranks, " << r.tensors.size() << " operations, " << r.cycles.size()
      << " cycles\n";
  if (r.ranks < 2) {
    out << "(one rank: nobody waits for anybody)\n";
    return;
  }
  out << "slowest ranks first:\n";
  for (const auto& s : r.summary) {
    out << "  rank " << s.rank << ": last on " << s.tensors_last << " of " << r.tensors.size() << " operations (total "
        << ms(s.total_ns);
    if (!s.max_name.empty()) out << ", at most " << ms(s.max_ns) << " on '" << s.max_name << "' in cycle " << s.max_cycle;
    out << "), last in " << s.cycles_last << " of " << r.cycles.size() << " cycles\n";
  }
  out << "per cycle (the rank whose last tensor came last, and by how long):\n";
  for (const auto& e : r.cycles) out << "  cycle " << e.cycle << ": rank " << e.last_rank << " by " << ms(e.by_ns) << "\n";
  out << "per tensor (the rank that made it ready last, and by how long):\n";
  for (const auto& e : r.tensors)
    out << "  '" << e.name << "' cycle " << e.cycle << ": rank " << e.last_rank << " by " << ms(e.by_ns) << "\n";
}

}  // namespace chorus::telemetry::trace
