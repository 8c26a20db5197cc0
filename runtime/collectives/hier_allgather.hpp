// Hierarchical allgather(v) as a pure step list (run by hier_op.hpp), over the host groups the
// allreduce uses (hier_schedule.hpp), and the choice between it and the flat ring. Rank r's
// block may have any length (allgatherv: Horovod's allgather concatenates first dims that differ
// by rank); blocks lie anywhere in the result, one byte range each.
//
// Phases, with S = most ranks on a host and host x's ranks hosts[x][0..l_x):
//   0. inside each host, a ring allgather of the host's own blocks (shared memory);
//   1. across hosts, S rings in parallel: ring i joins hosts[x][i mod l_x] of every host x and
//      allgathers the blocks of hosts[x][i] (empty where i >= l_x), so each block crosses to
//      every other host exactly once and every local rank's connections carry part of it;
//   2. inside each host, for every other host x, ring allgathers of what phase 1 brought: round
//      k moves the blocks of hosts[x][k*l .. k*l+l) (l = ranks on our host), local rank j
//      holding the one at k*l+j.
// A host's link carries (H-1)/H of the result out, where the flat ring carries (N-1)/N; the
// longest chain of dependent transfers is (l-1) + (H-1) + (l-1) blocks instead of N-1, and
// every rank sends N-1 blocks in both. Phase 0 and 1 touch disjoint bytes and run together;
// phase 2 forwards a segment as soon as phase 1 delivered it (hier_readiness.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/collectives/hier_schedule.hpp"

namespace chorus {

/// The steps of rank `rank`; blocks[r] is where rank r's block lies in the result (bytes).
std::vector<hier_step> hier_allgather_steps(const host_groups& g, int rank, const std::vector<hier_block>& blocks);
/// Whether the groups fit the allgather's wire ids: hier_fits, and at most 256 inside-host
/// rings in phase 2 on every host (sum over other hosts x of ceil(l_x / l)).
bool hier_allgather_fits(const host_groups& g);

enum class allgather_choice : uint8_t { ring, hier };
/// "ring_allgather", "hier_allgather" (the metrics' and the trace's algorithm names).
const char* name_of(allgather_choice c);
/// Identical on every rank given identical inputs. Flat ring with `off`, or where the groups
/// have no hierarchy (one host, one rank per host: host_groups::hierarchical) or do not fit;
/// else (`on`, `auto`) hierarchical. Auto does not look at the size: the hierarchical form
/// sends as many frames as the ring and its longest dependent chain is shorter, so it is not
/// slower for small buffers either (docs/design.md, docs/performance.md).
allgather_choice choose_allgather(hier_mode mode, const host_groups& g);

}  // namespace chorus
