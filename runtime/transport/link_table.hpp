// The one table that decides how this rank reaches each peer (stream_link.hpp): shared memory
// where both ranks run the rings (CHORUS_SHM_BYTES > 0) and share a host identity (boot id,
// host name and /dev/shm's device, or CHORUS_HOST_ID: env/host_settings.hpp); TCP otherwise.
// Every rank computes it from every rank's published entry (shm/lanes.hpp round 1), so both
// ends of a pair decide alike. A planned shm lane whose segment cannot be created or opened
// falls back to TCP for that stream alone (lanes.hpp rounds 2-3).
#pragma once

#include <string>
#include <vector>

#include "runtime/transport/stream_link.hpp"

namespace chorus {

/// What one rank publishes about itself for the table.
struct link_entry {
  bool shm_on = false;   ///< it runs shared-memory rings
  std::string identity;  ///< its host identity
  /// The published form, "on <identity>" or "off <identity>", and back (false: malformed).
  std::string encode() const;
  static bool decode(const std::string& text, link_entry& out);
};

/// by_peer[p]: how `rank` reaches rank p (tcp for itself), with why, for logs and tests.
struct link_table {
  std::vector<link_kind> by_peer;
  std::vector<std::string> why;
  /// e.g. "rank 1 shm, rank 2 tcp (another host)".
  std::string describe(int rank) const;
};

link_table plan_links(int rank, const std::vector<link_entry>& ranks);

}  // namespace chorus
