// The link table (transport/link_table.hpp): shm exactly where both ranks run rings and share
// a host identity, with the reason for every TCP link; both ends of every pair decide alike;
// the published entry round-trips and malformed ones are refused.
#include <gtest/gtest.h>

#include "runtime/transport/link_table.hpp"

namespace chorus {
namespace {

TEST(link_table, shm_only_between_ranks_on_one_host_with_rings_on) {
  std::vector<link_entry> e = {{true, "host-a"}, {true, "host-a"}, {true, "host-b"}, {false, "host-a"}, {true, "host-b"}};
  auto t = plan_links(0, e);
  ASSERT_EQ(t.by_peer.size(), 5u);
  EXPECT_EQ(t.by_peer[0], link_kind::tcp);
  EXPECT_EQ(t.why[0], "this rank");
  EXPECT_EQ(t.by_peer[1], link_kind::shm);
  EXPECT_EQ(t.by_peer[2], link_kind::tcp);
  EXPECT_EQ(t.why[2], "another host");
  EXPECT_EQ(t.by_peer[3], link_kind::tcp);
  EXPECT_EQ(t.why[3], "rings off there (CHORUS_SHM_BYTES=0)");
  EXPECT_EQ(t.describe(0), "rank 1 shm, rank 2 tcp (another host), rank 3 tcp (rings off there (CHORUS_SHM_BYTES=0)), "
                           "rank 4 tcp (another host)");
  auto off = plan_links(3, e);
  EXPECT_EQ(off.by_peer[0], link_kind::tcp);
  EXPECT_EQ(off.why[0], "rings off here (CHORUS_SHM_BYTES=0)");
  EXPECT_EQ(plan_links(2, e).by_peer[4], link_kind::shm);
}

TEST(link_table, both_ends_of_every_pair_agree) {
  // Every mix of three identities and rings on/off over six ranks.
  for (int mask = 0; mask < 64; ++mask) {
    std::vector<link_entry> e;
    for (int r = 0; r < 6; ++r) e.push_back({(mask >> r & 1) != 0, "host-" + std::to_string(r % 3)});
    for (int a = 0; a < 6; ++a)
      for (int b = 0; b < 6; ++b)
        EXPECT_EQ(plan_links(a, e).by_peer[b], plan_links(b, e).by_peer[a]) << "mask " << mask << " ranks " << a << "," << b;
  }
}

TEST(link_table, entries_round_trip_and_malformed_ones_are_refused) {
  link_entry in{true, "boot:1 host:x shm:0x2f"}, out;
  ASSERT_TRUE(link_entry::decode(in.encode(), out));
  EXPECT_TRUE(out.shm_on);
  EXPECT_EQ(out.identity, in.identity);
  ASSERT_TRUE(link_entry::decode("off id", out));
  EXPECT_FALSE(out.shm_on);
  EXPECT_FALSE(link_entry::decode("maybe id", out));
  EXPECT_FALSE(link_entry::decode("on", out));
  EXPECT_FALSE(link_entry::decode("", out));
}

TEST(link_table, a_rank_outside_the_table_gets_tcp_everywhere) {
  std::vector<link_entry> e = {{true, "a"}, {true, "a"}};
  auto t = plan_links(7, e);
  ASSERT_EQ(t.by_peer.size(), 2u);
  EXPECT_EQ(t.by_peer[0], link_kind::tcp);
  EXPECT_EQ(t.by_peer[1], link_kind::tcp);
}

}  // namespace
}  // namespace chorus
