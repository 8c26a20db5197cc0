// The rules of host_blacklist.hpp: Horovod's cooldown formula, and the blacklist's states
// (blacklisted for good; blacklisted until a cooldown ends; readmitted with its count kept).
#include "bindings/cli/chorusrun/host_blacklist.hpp"

#include <algorithm>
#include <cmath>

namespace chorus::chorusrun {

std::chrono::duration<double> cooldown_after(int failures, const cooldown_range& range, double jitter) {
  const double lower = range.min_s, upper = range.max_s;
  // 2^failures overflows nothing in a double; past 2^62 the result is MAX anyway.
  const double delay = std::ldexp(lower, std::min(failures, 62)) + jitter * lower;
  return std::chrono::duration<double>(std::max(lower, std::min(upper, delay)));
}

host_blacklist::host_blacklist(std::optional<cooldown_range> cooldown, std::function<double()> jitter)
    : cooldown_(cooldown), jitter_(std::move(jitter)) {}

std::optional<host_blacklist::clock::time_point> host_blacklist::add(const std::string& host,
                                                                     clock::time_point now) {
  state& s = hosts_[host];
  s.blacklisted = true;
  if (!cooldown_) return std::nullopt;
  if (s.cooldown_end && now < *s.cooldown_end) return s.cooldown_end;
  ++s.failures;
  s.cooldown_end = now + std::chrono::duration_cast<clock::duration>(cooldown_after(s.failures, *cooldown_, jitter_()));
  return s.cooldown_end;
}

bool host_blacklist::blocked(const std::string& host, clock::time_point now) const {
  auto it = hosts_.find(host);
  if (it == hosts_.end() || !it->second.blacklisted) return false;
  return !it->second.cooldown_end || now < *it->second.cooldown_end;
}

std::vector<std::string> host_blacklist::readmit(clock::time_point now) {
  std::vector<std::string> back;
  for (auto& [host, s] : hosts_) {
    if (!s.blacklisted || !s.cooldown_end || now < *s.cooldown_end) continue;
    s.blacklisted = false;
    s.cooldown_end.reset();
    back.push_back(host);
  }
  return back;
}

std::vector<host_slots> host_blacklist::without_blocked(std::vector<host_slots> offered,
                                                        clock::time_point now) const {
  std::erase_if(offered, [&](const host_slots& h) { return blocked(h.host, now); });
  return offered;
}

std::vector<std::string> host_blacklist::blocked_hosts(clock::time_point now) const {
  std::vector<std::string> out;
  for (const auto& [host, s] : hosts_)
    if (blocked(host, now)) out.push_back(host);
  return out;
}

int host_blacklist::failures(const std::string& host) const {
  auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : it->second.failures;
}

}  // namespace chorus::chorusrun
