// The hierarchical allgather's step list and its choice (see hier_allgather.hpp).
#include "runtime/collectives/hier_allgather.hpp"

namespace chorus {
namespace {

// Phase 2's wire ids: 2 bits of phase, 8 of round, 6 of step (at most 63 steps: l <= 64).
uint16_t gather_wire(int round) { return static_cast<uint16_t>(2 << 14 | (round & 255) << 6); }

// Phase-2 rings on host h of `l` ranks: ceil(l_x / l) for every other host x (none when l = 1).
int inside_rounds(const host_groups& g, int h) {
  const int l = static_cast<int>(g.hosts[static_cast<std::size_t>(h)].size());
  int rounds = 0;
  if (l == 1) return 0;
  for (int x = 0; x < g.num_hosts(); ++x)
    if (x != h) rounds += (static_cast<int>(g.hosts[static_cast<std::size_t>(x)].size()) + l - 1) / l;
  return rounds;
}

}  // namespace

std::vector<hier_step> hier_allgather_steps(const host_groups& g, int rank, const std::vector<hier_block>& blocks) {
  std::vector<hier_step> out;
  const int S = g.max_local(), H = g.num_hosts();
  const int h = g.host_of[static_cast<std::size_t>(rank)], j = g.local_of[static_cast<std::size_t>(rank)];
  const auto& mine = g.hosts[static_cast<std::size_t>(h)];
  const int l = static_cast<int>(mine.size());
  // The block of local rank i of host x, empty where host x has no such rank.
  auto block_of = [&](int x, int i) {
    const auto& host = g.hosts[static_cast<std::size_t>(x)];
    return i < static_cast<int>(host.size()) ? blocks[static_cast<std::size_t>(host[static_cast<std::size_t>(i)])]
                                             : hier_block{};
  };

  // Phase 0: the host's own blocks.
  if (l > 1) {
    std::vector<hier_block> ring;
    for (int b = 0; b < l; ++b) ring.push_back(block_of(h, b));
    append_ring(out, 0, hier_wire(0, 0, 0), mine, j, ring, ring_allgather_steps(j, l));
  }
  if (H == 1) return out;
  // Phase 1: the cross-host rings we are a member of (i mod l == j).
  for (int i = j; i < S; i += l) {
    std::vector<int> members;
    std::vector<hier_block> ring;
    for (int x = 0; x < H; ++x) {
      const auto& host = g.hosts[static_cast<std::size_t>(x)];
      members.push_back(host[static_cast<std::size_t>(i % static_cast<int>(host.size()))]);
      ring.push_back(block_of(x, i));
    }
    append_ring(out, 1, hier_wire(1, i, 0), members, h, ring, ring_allgather_steps(h, H));
  }
  // Phase 2: what the rings brought, shared inside the host.
  if (l > 1) {
    int round = 0;
    for (int x = 0; x < H; ++x) {
      if (x == h) continue;
      const int lx = static_cast<int>(g.hosts[static_cast<std::size_t>(x)].size());
      for (int k = 0; k * l < lx; ++k, ++round) {
        std::vector<hier_block> ring;
        for (int b = 0; b < l; ++b) ring.push_back(block_of(x, k * l + b));
        append_ring(out, 2, gather_wire(round), mine, j, ring, ring_allgather_steps(j, l));
      }
    }
  }
  return out;
}

bool hier_allgather_fits(const host_groups& g) {
  if (!hier_fits(g)) return false;
  for (int h = 0; h < g.num_hosts(); ++h)
    if (inside_rounds(g, h) > 256) return false;
  return true;
}

const char* name_of(allgather_choice c) { return c == allgather_choice::hier ? "hier_allgather" : "ring_allgather"; }

allgather_choice choose_allgather(hier_mode mode, const host_groups& g) {
  if (mode == hier_mode::off || !g.hierarchical() || !hier_allgather_fits(g)) return allgather_choice::ring;
  return allgather_choice::hier;
}

}  // namespace chorus
