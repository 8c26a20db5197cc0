// The chunk size in force, decided in one place for the communicator's collectives and for the
// pipeline's fusion: CHORUS_CHUNK_BYTES where set, else its default, lowered where flat rings
// cross hosts (a chunk that lands on a slow connection then holds an operation a quarter as
// long, and the fast connections take the tail; docs/performance.md, emulated hosts). The
// hierarchical allreduce already sends a chunk across hosts in L parts (hier_chunks).
#pragma once

#include <cstddef>

#include "runtime/collectives/hier_schedule.hpp"
#include "runtime/transport/host_groups.hpp"

namespace chorus {

/// The chunk size when CHORUS_CHUNK_BYTES is not set and flat rings cross hosts (one rank per
/// host, or CHORUS_HIERARCHICAL=off).
inline constexpr std::size_t cross_host_chunk_bytes = 1u << 20;

/// `configured` where `given` (the variable was set), else `configured` lowered to
/// cross_host_chunk_bytes where `hosts` under `mode` run flat rings across hosts.
std::size_t chunk_bytes_in_force(std::size_t configured, bool given, const host_groups& hosts, hier_mode mode);

}  // namespace chorus
