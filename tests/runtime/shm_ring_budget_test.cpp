// The share of a host's free memory that a rank's shared-memory rings may take
// (runtime/transport/shm/ring_budget.hpp).
#include "runtime/transport/shm/ring_budget.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace chorus::shm {
namespace {

constexpr uint64_t MiB = 1u << 20, GiB = uint64_t{1} << 30;
constexpr uint64_t ring = 2 * MiB + 4096, box = 128 * 1024 + 4096;
constexpr uint64_t unknown = std::numeric_limits<uint64_t>::max();

TEST(RingBudget, EveryStreamGetsARingWhenTheShareHoldsThem) {
  // 8 ranks on a host with 21 GiB free: 7 x 8 rings of 2 MiB (112 MiB) against a 672 MiB share.
  auto p = plan_rings(7, 8, ring, box, 21 * GiB);
  EXPECT_EQ(p.streams, 8);
  EXPECT_EQ(p.share_bytes, 21 * GiB / 4 / 8);
  EXPECT_EQ(p.wanted_bytes, 7 * 8 * ring + 7 * box);
  EXPECT_EQ(p.why, "");
}

TEST(RingBudget, ManyRanksGetRingsOnTheirFirstStreamsOnly) {
  // 32 ranks, 21 GiB free: a share of 168 MiB holds 2 rings to each of 31 peers (124 MiB and the
  // mailboxes), not 3 (186 MiB).
  auto p = plan_rings(31, 8, ring, box, 21 * GiB);
  EXPECT_EQ(p.streams, 2);
  EXPECT_NE(p.why.find("32 ranks on this host"), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("share of 168 MiB"), std::string::npos) << p.why;
  // 64 ranks: 84 MiB cannot hold one ring to each of 63 peers (126 MiB): TCP, mailboxes only.
  EXPECT_EQ(plan_rings(63, 8, ring, box, 21 * GiB).streams, 0);
}

TEST(RingBudget, TheRingsNeverPassTheShareAndOneMoreStreamWould) {
  for (int peers : {1, 3, 7, 15, 31, 63, 127, 255})
    for (int streams : {1, 2, 8, 16})
      for (uint64_t free : {64 * MiB, GiB, 4 * GiB, 21 * GiB, 512 * GiB}) {
        auto p = plan_rings(peers, streams, ring, box, free);
        ASSERT_GE(p.streams, 0);
        ASSERT_LE(p.streams, streams);
        auto used = [&](int s) { return uint64_t(peers) * (uint64_t(s) * ring + box); };
        SCOPED_TRACE(std::to_string(peers) + " peers, " + std::to_string(streams) + " streams, " +
                     std::to_string(free >> 20) + " MiB free");
        EXPECT_EQ(p.share_bytes, free / 4 / uint64_t(peers + 1));
        if (p.streams < streams) {
          EXPECT_GT(used(p.streams + 1), p.share_bytes);
          if (p.streams > 0) EXPECT_LE(used(p.streams), p.share_bytes);
          EXPECT_FALSE(p.why.empty());
        } else {
          EXPECT_LE(used(streams), p.share_bytes);
        }
      }
}

TEST(RingBudget, NoLocalPeersOrUnknownMemoryIsNoLimit) {
  // No rank beside us on this host (every peer elsewhere): nothing to make, nothing to say.
  auto alone = plan_rings(0, 8, ring, box, 64 * MiB);
  EXPECT_EQ(alone.streams, 8);
  EXPECT_EQ(alone.wanted_bytes, 0u);
  EXPECT_EQ(alone.why, "");
  EXPECT_EQ(plan_rings(7, 0, ring, box, 21 * GiB).streams, 0);
  auto p = plan_rings(63, 8, ring, box, unknown);
  EXPECT_EQ(p.streams, 8);
  EXPECT_EQ(p.why, "");
  // Sums that would wrap 64 bits (a ring of 1 EiB) are wanted in full, and get no ring.
  auto huge = plan_rings(1000, 64, uint64_t{1} << 60, box, 21 * GiB);
  EXPECT_EQ(huge.wanted_bytes, unknown);
  EXPECT_EQ(huge.streams, 0);
}

TEST(RingBudget, FreeMemoryIsReadFromThisHost) {
  uint64_t free = free_shared_memory();
  EXPECT_GT(free, 0u);
  EXPECT_NE(free, unknown) << "neither /proc/meminfo nor /dev/shm could be read";
}

}  // namespace
}  // namespace chorus::shm
