// Hierarchical allreduce as pure step lists (executed by hier_op.hpp) over the host groups of
// transport/host_groups.hpp. Every rank derives the groups from the host identities all ranks published
// at start-up (shm/lanes.hpp, round 1), so every rank computes the same groups; nobody decides.
//
// Shard layout. A buffer of `count` elements is cut into S = max ranks per host shards
// (block_begin(count, S, s)). On a host with l ranks, local rank i owns the shards s with
// s mod l == i: on even hosts one shard each; on a host with fewer ranks some rank owns
// several (2 + 1 ranks: the lone rank owns shards 0 and 1). Shard s is reduced across hosts by
// the ring of its owners, one per host, so the rings of the L shards run in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/collectives/ring_schedule.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/transport/host_groups.hpp"

namespace chorus {

/// One transfer of a step. A step's send goes out when its phase opens (`forward` false), or
/// segment by segment as the previous step's receive delivers them (`forward` true: then it
/// covers exactly that receive's range). Wire ids name the transfer in frames: a send's wire
/// id equals the matching receive's on the peer.
struct hier_transfer {
  int peer = -1;  ///< global rank; -1: none
  std::size_t offset = 0;  ///< bytes into the chunk
  std::size_t length = 0;
  uint16_t wire = 0;
};
struct hier_step {
  int phase = 0;  ///< 0, 1, 2: a phase opens when every receive of the earlier phases completed
  hier_transfer send;
  bool forward = false;
  hier_transfer recv;
  bool reduce = true;  ///< the receive is reduced into our bytes (else copied over them)
};

/// A byte range of a chunk (a ring's block); may be empty.
struct hier_block {
  std::size_t offset = 0;
  std::size_t length = 0;
};
/// Appends the steps `ring` (ring_schedule.hpp) of the ring of `members` at our position `pos`,
/// block b lying at blocks[b]: every step after the first forwards what the one before
/// received. Step g's transfers carry wire id `wire_base + g` (the caller leaves room for them).
void append_ring(std::vector<hier_step>& out, int phase, uint16_t wire_base, const std::vector<int>& members, int pos,
                 const std::vector<hier_block>& blocks, const std::vector<ring_step>& ring);

/// Wire id of step g of ring `round` in `phase` (2 + 6 + 8 bits).
uint16_t hier_wire(int phase, int round, int g);
/// Whether the groups fit the wire ids: at most 64 ranks per host and 128 hosts.
bool hier_fits(const host_groups& g);

/// Sharded: reduce-scatter of the shards inside each host (phase 0), ring allreduce of each
/// shard among its owners across hosts (phase 1), allgather of the shards inside each host
/// (phase 2). Ranges in bytes of a chunk of `count` elements of `elem` bytes.
std::vector<hier_step> hier_sharded_steps(const host_groups& g, int rank, std::size_t count, std::size_t elem);
/// Leader: chain reduce to each host's first rank (phase 0), ring allreduce among those
/// leaders (phase 1), chain broadcast inside each host (phase 2).
std::vector<hier_step> hier_leader_steps(const host_groups& g, int rank, std::size_t count, std::size_t elem);

/// How the sharded variant cuts a buffer where flat chunks are `chunk_bytes` and a stream runs
/// CHORUS_CHUNKS_IN_FLIGHT of them (chunk_scheduler.hpp's window, counted in bytes). A sharded
/// chunk keeps its place in the window until the slowest of its L cross-host rings (L = most
/// ranks on a host) and the allgather after it are done, so a ring that falls behind holds up
/// a whole chunk. So chunks are cut L² times finer (`bytes`), but never to shards below
/// min_shard_bytes per local rank (nor above chunk_bytes), in whole elements, and each is
/// charged 1/L of a slot (`charge` = chunk_bytes / L): a stream runs L × CHORUS_CHUNKS_IN_FLIGHT
/// of them, pieces that finish one by one, 1/L of the flat bytes in flight where the floor does
/// not bind. On 4 ranks per host at the defaults: 256 KiB chunks, 8 per stream
/// (docs/performance.md).
struct hier_chunking {
  std::size_t bytes = 0;
  std::size_t charge = 0;
  static constexpr std::size_t min_shard_bytes = 64u << 10;
};
hier_chunking hier_chunks(const host_groups& g, std::size_t chunk_bytes, std::size_t elem);

/// CHORUS_HIERARCHICAL.
enum class hier_mode { automatic, on, off };
/// "auto", "on", "off" (also "1" = on, "0" = off, as HOROVOD_HIERARCHICAL_ALLREDUCE); false when unknown.
bool parse_hier_mode(const std::string& text, hier_mode& out);

enum class allreduce_choice : uint8_t { ring, recursive_doubling, hier_sharded, hier_leader };
const char* name_of(allreduce_choice c);
/// The algorithm of one allreduce chunk of `bytes`, identical on every rank given identical
/// inputs. Without a hierarchy (see host_groups::hierarchical) or with `off`: recursive
/// doubling up to small_bytes, else ring. `on`: leader up to small_bytes, else sharded. `auto`:
/// recursive doubling up to small_bytes (latency: the leader chain adds hops), else sharded.
allreduce_choice choose_allreduce(hier_mode mode, const host_groups& g, std::size_t bytes, std::size_t small_bytes);

}  // namespace chorus
