// The three rendezvous rounds that set up the shared-memory rings.
#include "runtime/transport/shm/lanes.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "runtime/core/log.hpp"
#include "runtime/env/host_settings.hpp"
#include "runtime/transport/shm/ring_budget.hpp"
#include "runtime/wire/handshake.hpp"

namespace chorus::shm {
namespace {

constexpr const char* name_prefix = "/chorus-";

struct announced {
  int peer;
  int stream;
  std::string name;
  uint64_t nonce;
};

// 64 bits of the handshake's nonce source (OpenSSL's generator, the OS's as a fallback).
uint64_t segment_nonce() {
  auto n = wire::random_nonce();
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | n[static_cast<std::size_t>(i)];
  return v;
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << std::hex << v;
  return os.str();
}

}  // namespace

std::string host_identity() { return chorus::host_identity(read_host_settings()); }

result<lane_set> open_lanes(const process_env& env, rendezvous& rdv, int streams, std::size_t ring_bytes,
                            std::chrono::milliseconds timeout, const wire::frame_limits& limits) {
  lane_set out;
  auto& lanes = out.lanes;
  lanes.resize(static_cast<std::size_t>(env.size));
  for (auto& l : lanes) l.resize(static_cast<std::size_t>(streams));
  link_entry mine_entry{ring_bytes > 0, host_identity()};
  if (env.size == 1) {
    out.identities = {mine_entry.identity};
    out.entries = {mine_entry};
    out.table = plan_links(0, {mine_entry});
    return out;
  }
  const std::string me = std::to_string(env.rank);

  // 1. Who shares our host. Every rank publishes its entry, lanes on or off: the identities
  // also group the ranks by host (transport/host_groups.hpp).
  auto st = rdv.publish("shm-host/" + me, mine_entry.encode());
  if (!st.ok()) return st;
  auto hosts = rdv.gather("shm-host/", timeout);
  if (!hosts) return hosts.error();
  std::vector<link_entry> entries(hosts->size());
  for (std::size_t r = 0; r < hosts->size(); ++r)
    if (!link_entry::decode((*hosts)[r], entries[r]))
      return status{errc::protocol, "rank " + std::to_string(r) + " published a malformed host entry '" +
                                        (*hosts)[r] + "' (expected 'on <identity>' or 'off <identity>')"};
  for (const auto& e : entries) out.identities.push_back(e.identity);
  out.table = plan_links(env.rank, entries);
  out.entries = entries;

  // 2. A segment per stream for each such peer.
  std::vector<std::unique_ptr<segment>> created;  // [peer * streams + stream]
  created.resize(static_cast<std::size_t>(env.size * streams));
  // [peer * mailbox_uses + use]
  std::vector<std::unique_ptr<segment>> mail_created(static_cast<std::size_t>(env.size * mailbox_uses));
  for (auto& m : out.mail) {
    m.out.resize(static_cast<std::size_t>(env.size));
    m.in.resize(static_cast<std::size_t>(env.size));
  }
  std::ostringstream mine;
  // Rings on as many streams to each local peer as this rank's share of the host's free memory
  // holds (ring_budget.hpp); the streams past them send on TCP.
  int ring_streams = streams;
  if (ring_bytes) {
    int local_peers = static_cast<int>(std::count(out.table.by_peer.begin(), out.table.by_peer.end(), link_kind::shm));
    auto plan = plan_rings(local_peers, streams, segment::footprint(ring_bytes), mailbox_uses * segment::footprint(mailbox_capacity()),
                           free_shared_memory());
    ring_streams = plan.streams;
    // The host's lowest rank warns; the others, who decide alike, say it at info.
    const auto& kinds = out.table.by_peer;
    bool first_here = std::find(kinds.begin(), kinds.begin() + env.rank, link_kind::shm) == kinds.begin() + env.rank;
    if (ring_streams < streams) {
      std::string what = plan.why + ": rings on " + std::to_string(ring_streams) + " of the " + std::to_string(streams) +
                         " streams to each local rank, TCP on the others (CHORUS_SHM_BYTES sets the ring size)";
      if (first_here)
        CHORUS_LOG(warn, "shm", what);
      else
        CHORUS_LOG(info, "shm", what);
    }
  }
  for (int p = 0; p < env.size && ring_bytes; ++p) {
    if (out.table.by_peer[static_cast<std::size_t>(p)] != link_kind::shm) continue;
    for (int s = 0; s < ring_streams; ++s) {
      uint64_t nonce = segment_nonce();
      std::string name = name_prefix + hex(env.job_id) + "-" + me + "-" + std::to_string(p) + "-" +
                         std::to_string(s) + "-" + hex(nonce);
      auto seg = segment::create(name, ring_bytes, nonce);
      if (!seg) {
        CHORUS_LOG(warn, "shm", seg.error().message() << "; rank " << p << " stream " << s << " uses TCP only");
        continue;
      }
      created[static_cast<std::size_t>(p * streams + s)] = std::move(*seg);
      mine << p << ' ' << s << ' ' << name << ' ' << nonce << '\n';
    }
    for (int u = 0; u < mailbox_uses; ++u) {
      uint64_t nonce = segment_nonce();
      std::string name = name_prefix + hex(env.job_id) + "-" + me + "-" + std::to_string(p) + "-mail" +
                         std::to_string(u) + "-" + hex(nonce);
      auto seg = segment::create(name, mailbox_capacity(), nonce);
      if (!seg) {
        CHORUS_LOG(warn, "shm", seg.error().message() << "; no mailbox to rank " << p
                                                       << ": allreduces go through the I/O thread");
        continue;
      }
      mail_created[static_cast<std::size_t>(p * mailbox_uses + u)] = std::move(*seg);
      mine << p << ' ' << streams + u << ' ' << name << ' ' << nonce << '\n';
    }
  }
  st = rdv.publish("shm-ring/" + me, mine.str());
  if (!st.ok()) return st;
  auto rings = rdv.gather("shm-ring/", timeout);
  if (!rings) return rings.error();

  // 3. Open what is addressed to us; say which ones we can read.
  std::ostringstream ok;
  for (int q = 0; q < env.size; ++q) {
    if (q == env.rank) continue;
    std::istringstream in((*rings)[q]);
    announced a;
    while (in >> a.peer >> a.stream >> a.name >> a.nonce) {
      // Streams S and S + 1: the mailboxes.
      if (a.peer != env.rank || a.stream < 0 || a.stream >= streams + mailbox_uses) continue;
      if (a.name.rfind(name_prefix, 0) != 0) {  // the store is not authenticated: open nothing else
        CHORUS_LOG(warn, "shm", "rank " << q << " announced a segment not named " << name_prefix << "...: " << a.name);
        continue;
      }
      auto seg = segment::open(a.name, a.nonce);
      if (!seg) {
        CHORUS_LOG(warn, "shm", seg.error().message() << "; rank " << q << " stream " << a.stream
                                                       << " sends on TCP only");
        continue;
      }
      if (a.stream >= streams)
        out.mail[static_cast<std::size_t>(a.stream - streams)].in[static_cast<std::size_t>(q)] =
            std::make_unique<mailbox_reader>(std::move(*seg), q);
      else
        lanes[q][a.stream].in = std::make_unique<ring_reader>(std::move(*seg), limits);
      ok << q << ' ' << a.stream << '\n';
    }
  }
  st = rdv.publish("shm-ok/" + me, ok.str());
  if (!st.ok()) return st;
  auto oks = rdv.gather("shm-ok/", timeout);
  if (!oks) return oks.error();
  int used = 0;
  std::array<std::set<std::pair<int, int>>, mailbox_uses> mail_pairs;  // [use] (p, q): rank p opened q's to p
  for (int p = 0; p < env.size; ++p) {
    std::istringstream in((*oks)[p]);
    int who = 0, s = 0;
    while (in >> who >> s) {
      if (s >= streams && s < streams + mailbox_uses && who >= 0 && who < env.size && who != p)
        mail_pairs[static_cast<std::size_t>(s - streams)].insert({p, who});
      if (p == env.rank || who != env.rank || s < 0 || s >= streams + mailbox_uses) continue;
      if (s >= streams) {
        const int u = s - streams;
        auto& box = mail_created[static_cast<std::size_t>(p * mailbox_uses + u)];
        if (!box) continue;
        box->unlink();
        out.mail[static_cast<std::size_t>(u)].out[static_cast<std::size_t>(p)] =
            std::make_unique<mailbox_writer>(std::move(box));
        continue;
      }
      auto& seg = created[static_cast<std::size_t>(p * streams + s)];
      if (!seg) continue;
      seg->unlink();
      lanes[p][s].out = std::make_unique<ring_writer>(std::move(seg));
      ++used;
    }
  }
  for (int u = 0; u < mailbox_uses; ++u)
    out.mail[static_cast<std::size_t>(u)].everywhere =
        mail_pairs[static_cast<std::size_t>(u)].size() ==
        static_cast<std::size_t>(env.size) * static_cast<std::size_t>(env.size - 1);
  // What nobody opened is removed with `created` (the segment's destructor unlinks it).
  if (used) CHORUS_LOG(info, "shm", "shared-memory rings to " << used << " peer streams, " << ring_bytes << " bytes each");
  return out;
}

}  // namespace chorus::shm
