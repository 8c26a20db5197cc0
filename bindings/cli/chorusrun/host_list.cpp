// Host lists, hostfiles and rank placement for chorusrun.
#include "bindings/cli/chorusrun/host_list.hpp"

#include <charconv>
#include <map>
#include <sstream>

namespace chorus::chorusrun {
namespace {

status list_error(std::string message) { return {errc::invalid_argument, std::move(message)}; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

result<int> parse_slots(std::string_view text, std::string_view where) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0)
    return list_error(std::string(where) + ": slots must be a positive integer, got '" + std::string(text) + "'");
  return v;
}

bool valid_host(std::string_view h) {
  if (h.empty()) return false;
  for (char c : h)
    if (c == ' ' || c == '\t' || c == ',' || c == '\'' || c == '"' || c == '\\' || c == '[' || c == ']') return false;
  return true;
}

// "host", "host:N", "[v6]", "[v6]:N".
result<host_slots> parse_entry(std::string_view entry) {
  std::string where = "-H entry '" + std::string(entry) + "'";
  host_slots hs;
  std::string_view rest;
  if (!entry.empty() && entry.front() == '[') {
    auto close = entry.find(']');
    if (close == std::string_view::npos) return list_error(where + ": no closing ']'");
    hs.host = std::string(entry.substr(1, close - 1));
    rest = entry.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return list_error(where + ": expected ':' after ']'");
  } else {
    auto colon = entry.find(':');
    if (colon != std::string_view::npos && entry.find(':', colon + 1) != std::string_view::npos)
      return list_error(where + ": an IPv6 address needs brackets, e.g. [::1]:2");
    hs.host = std::string(entry.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : entry.substr(colon);
  }
  if (!valid_host(hs.host)) return list_error(where + ": bad host name");
  if (!rest.empty()) {
    auto n = parse_slots(rest.substr(1), where);
    if (!n) return n.error();
    hs.slots = *n;
  }
  return hs;
}

}  // namespace

result<std::vector<host_slots>> parse_host_list(std::string_view text) {
  std::vector<host_slots> out;
  size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    auto entry = trim(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (entry.empty()) return list_error("-H '" + std::string(text) + "': empty host entry");
    auto hs = parse_entry(entry);
    if (!hs) return hs.error();
    out.push_back(std::move(*hs));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

result<std::vector<host_slots>> parse_hostfile(std::string_view text, std::string_view origin) {
  std::vector<host_slots> out;
  std::istringstream in{std::string(text)};
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::string_view l = line;
    if (auto hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
    l = trim(l);
    if (l.empty()) continue;
    std::string where = std::string(origin) + ":" + std::to_string(line_no);
    std::istringstream words{std::string(l)};
    std::string host, word;
    words >> host;
    host_slots hs;
    hs.host = host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') hs.host = host.substr(1, host.size() - 2);
    else if (!valid_host(host)) return list_error(where + ": bad host name '" + host + "'");
    bool have_slots = false;
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0 || have_slots)
        return list_error(where + ": expected 'host slots=N', got '" + std::string(l) + "'");
      auto n = parse_slots(std::string_view(word).substr(6), where);
      if (!n) return n.error();
      hs.slots = *n;
      have_slots = true;
    }
    out.push_back(std::move(hs));
  }
  if (out.empty()) return list_error(std::string(origin) + ": no hosts in the hostfile");
  return out;
}

result<std::vector<placement>> place_ranks(const std::vector<host_slots>& hosts, int num_ranks) {
  int total = 0;
  std::map<std::string, int> seen;
  for (const auto& h : hosts) {
    if (seen[h.host]++) return list_error("host '" + h.host + "' is listed twice; give its slots once");
    total += h.slots;
  }
  if (num_ranks > total)
    return list_error("-np " + std::to_string(num_ranks) + " needs more slots than the hosts have (" +
                      std::to_string(total) + ")");
  std::vector<placement> out;
  std::vector<int> per_host;  // ranks placed on each used host
  for (size_t h = 0; h < hosts.size() && static_cast<int>(out.size()) < num_ranks; ++h) {
    per_host.push_back(0);
    for (int s = 0; s < hosts[h].slots && static_cast<int>(out.size()) < num_ranks; ++s) {
      placement p;
      p.rank = static_cast<int>(out.size());
      p.host_index = static_cast<int>(h);
      p.host = hosts[h].host;
      p.local_rank = s;
      out.push_back(std::move(p));
      ++per_host.back();
    }
  }
  for (auto& p : out) {
    p.local_size = per_host[static_cast<size_t>(p.host_index)];
    p.cross_size = 0;
    p.cross_rank = 0;
    for (size_t h = 0; h < per_host.size(); ++h) {
      if (per_host[h] <= p.local_rank) continue;
      if (static_cast<int>(h) < p.host_index) ++p.cross_rank;
      ++p.cross_size;
    }
  }
  return out;
}

bool is_loopback_name(std::string_view host) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1";
}

}  // namespace chorus::chorusrun
