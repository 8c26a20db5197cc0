// The sharded and leader step lists, and the allreduce algorithm choice.
#include "runtime/collectives/hier_schedule.hpp"

#include <algorithm>

#include "runtime/collectives/ring_schedule.hpp"

namespace chorus {
namespace {

using range = hier_block;

// Element range [lo, hi) of `parts` equal parts of [first, first + count), as bytes.
range part_of(std::size_t first, std::size_t count, int parts, int b, std::size_t elem) {
  std::size_t lo = block_begin(count, parts, b), hi = block_begin(count, parts, b + 1);
  return {(first + lo) * elem, (hi - lo) * elem};
}

hier_transfer to(int peer, range r, uint16_t wire) { return {peer, r.offset, r.length, wire}; }

}  // namespace

void append_ring(std::vector<hier_step>& out, int phase, uint16_t wire_base, const std::vector<int>& members, int pos,
                 const std::vector<hier_block>& blocks, const std::vector<ring_step>& ring) {
  const int n = static_cast<int>(members.size());
  const int right = members[static_cast<std::size_t>((pos + 1) % n)];
  const int left = members[static_cast<std::size_t>((pos + n - 1) % n)];
  for (std::size_t g = 0; g < ring.size(); ++g) {
    const auto wire = static_cast<uint16_t>(wire_base + g);
    hier_step s;
    s.phase = phase;
    s.send = to(right, blocks[static_cast<std::size_t>(ring[g].send_block)], wire);
    s.forward = g > 0;
    s.recv = to(left, blocks[static_cast<std::size_t>(ring[g].recv_block)], wire);
    s.reduce = ring[g].reduce;
    out.push_back(s);
  }
}

uint16_t hier_wire(int phase, int round, int g) {
  return static_cast<uint16_t>((phase & 3) << 14 | (round & 63) << 8 | (g & 255));
}

bool hier_fits(const host_groups& g) { return g.max_local() <= 64 && g.num_hosts() <= 128; }

std::vector<hier_step> hier_sharded_steps(const host_groups& g, int rank, std::size_t count, std::size_t elem) {
  std::vector<hier_step> out;
  const int S = g.max_local(), H = g.num_hosts();
  const int h = g.host_of[static_cast<std::size_t>(rank)], i = g.local_of[static_cast<std::size_t>(rank)];
  const auto& mine = g.hosts[static_cast<std::size_t>(h)];
  const int l = static_cast<int>(mine.size());
  auto shard = [&](int s) { return s < S ? part_of(0, count, S, s, elem) : range{}; };
  const int rounds = (S + l - 1) / l;

  // Phase 0: round k reduce-scatters shards k*l .. k*l+l-1 among the host's ranks, local rank
  // j ending with shard k*l+j. The ring leaves rank j with block j+1, so block b holds the
  // shard of local rank b-1.
  if (l > 1)
    for (int k = 0; k < rounds; ++k) {
      std::vector<range> blocks(static_cast<std::size_t>(l));
      for (int b = 0; b < l; ++b) blocks[static_cast<std::size_t>(b)] = shard(k * l + (b + l - 1) % l);
      append_ring(out, 0, hier_wire(0, k, 0), mine, i, blocks, ring_reducescatter_steps(i, l));
    }
  // Phase 1: every shard we own, allreduced by the ring of its owners (one per host).
  if (H > 1)
    for (int s = i; s < S; s += l) {
      std::vector<int> owners;
      for (const auto& host : g.hosts) owners.push_back(host[static_cast<std::size_t>(s % static_cast<int>(host.size()))]);
      std::size_t first = block_begin(count, S, s), n = block_begin(count, S, s + 1) - first;
      std::vector<range> blocks;
      for (int b = 0; b < H; ++b) blocks.push_back(part_of(first, n, H, b, elem));
      append_ring(out, 1, hier_wire(1, s, 0), owners, h, blocks, ring_allreduce_steps(h, H));
    }
  // Phase 2: round k gathers shards k*l .. k*l+l-1; local rank j starts with its own.
  if (l > 1)
    for (int k = 0; k < rounds; ++k) {
      std::vector<range> blocks(static_cast<std::size_t>(l));
      for (int b = 0; b < l; ++b) blocks[static_cast<std::size_t>(b)] = shard(k * l + b);
      append_ring(out, 2, hier_wire(2, k, 0), mine, i, blocks, ring_allgather_steps(i, l));
    }
  return out;
}

std::vector<hier_step> hier_leader_steps(const host_groups& g, int rank, std::size_t count, std::size_t elem) {
  std::vector<hier_step> out;
  const int H = g.num_hosts();
  const int h = g.host_of[static_cast<std::size_t>(rank)], i = g.local_of[static_cast<std::size_t>(rank)];
  const auto& mine = g.hosts[static_cast<std::size_t>(h)];
  const int l = static_cast<int>(mine.size());
  const range all{0, count * elem};
  auto local = [&](int j) { return mine[static_cast<std::size_t>(j)]; };

  // Phase 0: the chain l-1 -> l-2 -> ... -> 0, each link j+1 -> j reducing (wire g = j).
  if (l > 1) {
    if (i < l - 1) {
      hier_step s;
      s.phase = 0;
      s.recv = to(local(i + 1), all, hier_wire(0, 0, i));
      s.reduce = true;
      out.push_back(s);
    }
    if (i > 0) {
      hier_step s;
      s.phase = 0;
      s.send = to(local(i - 1), all, hier_wire(0, 0, i - 1));
      s.forward = i < l - 1;
      out.push_back(s);
    }
  }
  // Phase 1: the leaders' ring allreduce.
  if (i == 0 && H > 1) {
    std::vector<int> leaders;
    for (const auto& host : g.hosts) leaders.push_back(host.front());
    std::vector<range> blocks;
    for (int b = 0; b < H; ++b) blocks.push_back(part_of(0, count, H, b, elem));
    append_ring(out, 1, hier_wire(1, 0, 0), leaders, h, blocks, ring_allreduce_steps(h, H));
  }
  // Phase 2: the chain 0 -> 1 -> ... -> l-1, copying (link j -> j+1 is wire g = j).
  if (l > 1) {
    if (i > 0) {
      hier_step s;
      s.phase = 2;
      s.recv = to(local(i - 1), all, hier_wire(2, 0, i - 1));
      s.reduce = false;
      out.push_back(s);
    }
    if (i < l - 1) {
      hier_step s;
      s.phase = 2;
      s.send = to(local(i + 1), all, hier_wire(2, 0, i));
      s.forward = i > 0;
      out.push_back(s);
    }
  }
  return out;
}

bool parse_hier_mode(const std::string& text, hier_mode& out) {
  if (text == "auto") out = hier_mode::automatic;
  else if (text == "on" || text == "1") out = hier_mode::on;
  else if (text == "off" || text == "0") out = hier_mode::off;
  else return false;
  return true;
}

const char* name_of(allreduce_choice c) {
  switch (c) {
    case allreduce_choice::ring: return "ring";
    case allreduce_choice::recursive_doubling: return "recursive_doubling";
    case allreduce_choice::hier_sharded: return "hier_sharded";
    case allreduce_choice::hier_leader: return "hier_leader";
  }
  return "?";
}

hier_chunking hier_chunks(const host_groups& g, std::size_t chunk_bytes, std::size_t elem) {
  const std::size_t e = std::max<std::size_t>(elem, 1);
  const auto l = static_cast<std::size_t>(std::max(1, g.max_local()));
  std::size_t bytes = std::max(chunk_bytes / (l * l), l * hier_chunking::min_shard_bytes);
  bytes = std::max(std::min(bytes, chunk_bytes) / e * e, e);
  return {bytes, std::max<std::size_t>(chunk_bytes / l, 1)};
}

allreduce_choice choose_allreduce(hier_mode mode, const host_groups& g, std::size_t bytes, std::size_t small_bytes) {
  const bool small = bytes <= small_bytes;
  if (mode == hier_mode::off || !g.hierarchical() || !hier_fits(g))
    return small ? allreduce_choice::recursive_doubling : allreduce_choice::ring;
  if (mode == hier_mode::on) return small ? allreduce_choice::hier_leader : allreduce_choice::hier_sharded;
  return small ? allreduce_choice::recursive_doubling : allreduce_choice::hier_sharded;
}

}  // namespace chorus
