// Ranks grouped by host: every rank derives them from the host identities all ranks published
// at start-up (shm/lanes.hpp, round 1), so every rank computes the same groups.
#pragma once

#include <string>
#include <vector>

namespace chorus {

/// Ranks grouped by host; plain value.
struct host_groups {
  std::vector<std::vector<int>> hosts;  ///< ranks of each host, ascending; hosts ordered by lowest rank
  std::vector<int> host_of;             ///< rank -> index into hosts
  std::vector<int> local_of;            ///< rank -> its index within its host
  int num_hosts() const { return static_cast<int>(hosts.size()); }
  int max_local() const;
  /// More than one host and some host with more than one rank: only then does a hierarchy
  /// cut traffic (one host, or one rank per host, runs the flat algorithms).
  bool hierarchical() const;
  /// "2 hosts: [0,1] [2,3]"
  std::string describe() const;
};

/// Groups ranks whose identities are equal; identities[r] is rank r's.
host_groups group_by_host(const std::vector<std::string>& identities);

}  // namespace chorus
