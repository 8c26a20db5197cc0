// Ranks grouped by the host identity each published.
#include "runtime/transport/host_groups.hpp"

#include <algorithm>
#include <map>

namespace chorus {

int host_groups::max_local() const {
  std::size_t m = 0;
  for (const auto& h : hosts) m = std::max(m, h.size());
  return static_cast<int>(m);
}

bool host_groups::hierarchical() const { return hosts.size() > 1 && max_local() > 1; }

std::string host_groups::describe() const {
  std::string s = std::to_string(hosts.size()) + (hosts.size() == 1 ? " host:" : " hosts:");
  for (const auto& h : hosts) {
    s += " [";
    for (std::size_t i = 0; i < h.size(); ++i) s += (i ? "," : "") + std::to_string(h[i]);
    s += "]";
  }
  return s;
}

host_groups group_by_host(const std::vector<std::string>& identities) {
  host_groups g;
  std::map<std::string, int> index;  // identity -> host, numbered by first (lowest) rank
  const int n = static_cast<int>(identities.size());
  g.host_of.resize(static_cast<std::size_t>(n));
  g.local_of.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto [it, fresh] = index.emplace(identities[static_cast<std::size_t>(r)], static_cast<int>(g.hosts.size()));
    if (fresh) g.hosts.emplace_back();
    auto& h = g.hosts[static_cast<std::size_t>(it->second)];
    g.host_of[static_cast<std::size_t>(r)] = it->second;
    g.local_of[static_cast<std::size_t>(r)] = static_cast<int>(h.size());
    h.push_back(r);
  }
  return g;
}

}  // namespace chorus
