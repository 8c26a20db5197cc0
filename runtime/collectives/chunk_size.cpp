#include "runtime/collectives/chunk_size.hpp"

#include <algorithm>

namespace chorus {

std::size_t chunk_bytes_in_force(std::size_t configured, bool given, const host_groups& hosts, hier_mode mode) {
  const bool flat_across = hosts.num_hosts() > 1 && (!hosts.hierarchical() || mode == hier_mode::off);
  return given || !flat_across ? configured : std::min(configured, cross_host_chunk_bytes);
}

}  // namespace chorus
