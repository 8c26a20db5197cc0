// How many streams to each peer on this host get a shared-memory ring. Rings are memory that
// the sender reserves and touches up front: each rank makes one per stream to each local peer,
// (local ranks - 1) x streams x ring bytes, so 64 ranks on one host at the defaults (8 streams,
// 2 MiB rings) would ask for 64 GiB and meet the OOM killer instead of an error. The rings of
// one host may take a quarter of what it has free (the lesser of MemAvailable and /dev/shm's
// free space), split alike among its ranks. A rank whose share cannot hold a ring on every
// stream puts rings on its first streams to each peer and sends on TCP on the others, as a
// lane whose segment could not be made does (lanes.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::shm {

/// A host's rings may take this share of its free memory.
inline constexpr uint64_t ring_memory_divisor = 4;

struct ring_plan {
  int streams = 0;             ///< streams to each local peer that get a ring (0..all; all without local peers)
  uint64_t wanted_bytes = 0;   ///< what rings on every stream would take, mailboxes included
  uint64_t share_bytes = 0;    ///< this rank's share of the host's free memory
  /// Why fewer than every stream, for the log ("" when every stream gets a ring).
  std::string why;
};

/// `local_peers` ranks beside us on this host, `streams` per peer, `segment_bytes` for each
/// ring and `mailbox_bytes` for each peer's mailbox (both with their header page), `free_bytes`
/// of the host's memory free (UINT64_MAX: unknown, no limit).
ring_plan plan_rings(int local_peers, int streams, uint64_t segment_bytes, uint64_t mailbox_bytes,
                     uint64_t free_bytes);

/// The lesser of /proc/meminfo's MemAvailable and the free space of /dev/shm; UINT64_MAX when
/// neither can be read.
uint64_t free_shared_memory();

}  // namespace chorus::shm
