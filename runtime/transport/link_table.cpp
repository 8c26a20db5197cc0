// plan_links (link_table.hpp): one rule, both ends of a pair see the same entries.
#include "runtime/transport/link_table.hpp"

namespace chorus {

const char* name_of(link_kind k) { return k == link_kind::shm ? "shm" : "tcp"; }

std::string link_entry::encode() const { return (shm_on ? "on " : "off ") + identity; }

bool link_entry::decode(const std::string& text, link_entry& out) {
  auto space = text.find(' ');
  if (space == std::string::npos) return false;
  auto word = text.substr(0, space);
  if (word != "on" && word != "off") return false;
  out.shm_on = word == "on";
  out.identity = text.substr(space + 1);
  return true;
}

link_table plan_links(int rank, const std::vector<link_entry>& ranks) {
  link_table t;
  const auto n = ranks.size();
  t.by_peer.assign(n, link_kind::tcp);
  t.why.assign(n, "");
  if (rank < 0 || static_cast<std::size_t>(rank) >= n) return t;
  const auto& me = ranks[static_cast<std::size_t>(rank)];
  for (std::size_t p = 0; p < n; ++p) {
    const auto& peer = ranks[p];
    if (static_cast<int>(p) == rank) t.why[p] = "this rank";
    else if (peer.identity != me.identity) t.why[p] = "another host";
    else if (!me.shm_on) t.why[p] = "rings off here (CHORUS_SHM_BYTES=0)";
    else if (!peer.shm_on) t.why[p] = "rings off there (CHORUS_SHM_BYTES=0)";
    else {
      t.by_peer[p] = link_kind::shm;
      t.why[p] = "same host";
    }
  }
  return t;
}

std::string link_table::describe(int rank) const {
  std::string out;
  for (std::size_t p = 0; p < by_peer.size(); ++p) {
    if (static_cast<int>(p) == rank) continue;
    if (!out.empty()) out += ", ";
    out += "rank " + std::to_string(p) + " " + name_of(by_peer[p]);
    if (by_peer[p] == link_kind::tcp) out += " (" + why[p] + ")";
  }
  return out;
}

}  // namespace chorus
