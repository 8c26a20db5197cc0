// The share of a host's free memory that its ranks' rings may take.
#include "runtime/transport/shm/ring_budget.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace chorus::shm {
namespace {

constexpr uint64_t unknown = std::numeric_limits<uint64_t>::max();

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib > unknown / 1024 ? unknown : kib * 1024;
  }
  return unknown;
}

uint64_t shm_free() {
  struct statvfs s {};
  if (::statvfs("/dev/shm", &s) != 0 || s.f_frsize == 0) return unknown;
  if (s.f_bavail > unknown / s.f_frsize) return unknown;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

}  // namespace

ring_plan plan_rings(int local_peers, int streams, uint64_t segment_bytes, uint64_t mailbox_bytes,
                     uint64_t free_bytes) {
  ring_plan plan;
  plan.streams = std::max(streams, 0);
  if (local_peers <= 0 || streams <= 0) return plan;  // no ring to make: nothing to limit
  const auto peers = static_cast<uint64_t>(local_peers);
  // Sums in 128 bits: the factors are ours (a config's bounds, a stream count), but cheap to be safe.
  const unsigned __int128 rings = static_cast<unsigned __int128>(peers) * static_cast<uint64_t>(streams) * segment_bytes;
  const unsigned __int128 boxes = static_cast<unsigned __int128>(peers) * mailbox_bytes;
  const unsigned __int128 wanted = rings + boxes;
  plan.wanted_bytes = wanted > unknown ? unknown : static_cast<uint64_t>(wanted);
  if (free_bytes == unknown) {
    plan.share_bytes = unknown;
    return plan;
  }
  plan.share_bytes = free_bytes / ring_memory_divisor / (peers + 1);
  if (wanted <= plan.share_bytes) return plan;
  const uint64_t left = plan.share_bytes > boxes ? plan.share_bytes - static_cast<uint64_t>(boxes) : 0;
  const unsigned __int128 per_stream = static_cast<unsigned __int128>(peers) * segment_bytes;  // a ring more to each
  plan.streams = per_stream ? static_cast<int>(std::min<unsigned __int128>(left / per_stream, static_cast<unsigned>(streams)))
                            : streams;
  std::ostringstream why;
  why << local_peers + 1 << " ranks on this host with rings on " << streams << " streams of " << mib(segment_bytes)
      << " would take " << mib(plan.wanted_bytes) << " per rank, past its share of " << mib(plan.share_bytes)
      << " (1/" << ring_memory_divisor << " of the host's " << mib(free_bytes) << " free, split among its ranks)";
  plan.why = why.str();
  return plan;
}

uint64_t free_shared_memory() { return std::min(mem_available(), shm_free()); }

}  // namespace chorus::shm
