// Whether a collective keeps the fp16/bf16 compression it asked for, decided by the links
// between its members: where every pair is a shared-memory ring, the casts cost more than the
// bytes they save, so the op runs uncompressed (CHORUS_COMPRESSION_SHM=auto), unless forced (on).
// Pure: every rank builds it from the link entries all ranks published (transport/link_table.hpp),
// so every rank decides alike for the same members.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/compression/options.hpp"
#include "runtime/transport/link_table.hpp"

namespace chorus {

/// The decision for every set of members, from round 1 of the shared-memory setup (planned
/// links: a lane that later fell back to TCP for one stream does not change it). Plain value.
class compression_policy {
 public:
  /// Keeps every op's compression (nothing known about the links: e.g. tests without a mesh).
  compression_policy() = default;
  /// entries[r]: what rank r published (shm/lanes.hpp round 1).
  compression_policy(std::vector<link_entry> entries, shm_compression mode);

  /// True when every pair of `members` (global ranks; empty: all ranks) reaches each other
  /// through shared memory. False for fewer than two members: no link to judge.
  bool all_shm(const std::vector<int>& members = {}) const;
  /// What an op among `members` that asked for `asked` puts on the wire: none where all_shm and
  /// the mode is automatic, else `asked`. Identical on every rank for the same members.
  compression effective(compression asked, const std::vector<int>& members = {}) const;
  /// True when ops among all ranks that ask for compression run without it.
  bool drops_for_job() const { return effective(compression::fp16) == compression::none; }
  shm_compression mode() const { return mode_; }
  /// One line for the init log: which way it went for the whole job, and why.
  std::string describe() const;

 private:
  bool members_share_memory(const std::vector<int>& members) const;

  std::vector<link_entry> entries_;
  shm_compression mode_ = shm_compression::automatic;
  bool job_all_shm_ = false;  // all_shm() for all ranks, computed once (asked per op)
};

}  // namespace chorus
