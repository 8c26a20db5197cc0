// Host lists (-H), horovodrun hostfiles and rank placement with local and cross numbering.
#include "bindings/cli/chorusrun/host_list.hpp"

#include <gtest/gtest.h>

using namespace chorus::chorusrun;

TEST(host_list, parses_hosts_with_and_without_slots) {
  auto h = parse_host_list("a:2,b,[fd00::1]:3,10.0.0.2:1");
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(h->size(), 4u);
  EXPECT_EQ((*h)[0].host, "a");
  EXPECT_EQ((*h)[0].slots, 2);
  EXPECT_EQ((*h)[1].host, "b");
  EXPECT_EQ((*h)[1].slots, 1);
  EXPECT_EQ((*h)[2].host, "fd00::1");
  EXPECT_EQ((*h)[2].slots, 3);
  EXPECT_EQ((*h)[3].host, "10.0.0.2");
}

TEST(host_list, rejects_bad_entries_naming_them) {
  for (const char* bad : {"a:0", "a:x", "a:2,,b", "fd00::1:2", "[fd00::1", "a b:2", ""}) {
    auto h = parse_host_list(bad);
    EXPECT_FALSE(h) << bad;
  }
  auto h = parse_host_list("a:2,b:-1");
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message().find("b:-1"), std::string::npos) << h.error().message();
}

TEST(hostfile, reads_horovodrun_format) {
  auto h = parse_hostfile("# cluster\nnode1 slots=4\n\n  node2 slots=2  # spare\nnode3\n[fd00::2] slots=1\n", "hf");
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(h->size(), 4u);
  EXPECT_EQ((*h)[0].host, "node1");
  EXPECT_EQ((*h)[0].slots, 4);
  EXPECT_EQ((*h)[1].host, "node2");
  EXPECT_EQ((*h)[1].slots, 2);
  EXPECT_EQ((*h)[2].slots, 1);
  EXPECT_EQ((*h)[3].host, "fd00::2");
}

TEST(hostfile, errors_name_file_and_line) {
  auto h = parse_hostfile("node1 slots=4\nnode2 cpus=2\n", "my.hosts");
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message().find("my.hosts:2"), std::string::npos) << h.error().message();
  EXPECT_FALSE(parse_hostfile("# nothing\n", "empty"));
  EXPECT_FALSE(parse_hostfile("n slots=0\n", "zero"));
}

TEST(placement, fills_hosts_in_order_with_local_and_cross_numbers) {
  auto p = place_ranks({{"a", 2}, {"b", 2}, {"c", 1}}, 5);
  ASSERT_TRUE(p) << p.error().message();
  ASSERT_EQ(p->size(), 5u);
  // rank: host, local rank/size, cross rank/size
  const struct { const char* host; int lr, ls, cr, cs; } want[] = {
      {"a", 0, 2, 0, 3}, {"a", 1, 2, 0, 2}, {"b", 0, 2, 1, 3}, {"b", 1, 2, 1, 2}, {"c", 0, 1, 2, 3}};
  for (int r = 0; r < 5; ++r) {
    const auto& got = (*p)[static_cast<size_t>(r)];
    EXPECT_EQ(got.rank, r);
    EXPECT_EQ(got.host, want[r].host) << r;
    EXPECT_EQ(got.local_rank, want[r].lr) << r;
    EXPECT_EQ(got.local_size, want[r].ls) << r;
    EXPECT_EQ(got.cross_rank, want[r].cr) << r;
    EXPECT_EQ(got.cross_size, want[r].cs) << r;
  }
}

TEST(placement, fewer_ranks_than_slots_leave_later_hosts_empty) {
  auto p = place_ranks({{"a", 2}, {"b", 2}}, 3);
  ASSERT_TRUE(p);
  EXPECT_EQ((*p)[2].host, "b");
  EXPECT_EQ((*p)[2].local_size, 1);
  EXPECT_EQ((*p)[0].cross_size, 2);
  EXPECT_EQ((*p)[1].cross_size, 1);
}

TEST(placement, refuses_too_few_slots_and_duplicate_hosts) {
  auto p = place_ranks({{"a", 2}, {"b", 1}}, 4);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message().find("-np 4"), std::string::npos) << p.error().message();
  EXPECT_FALSE(place_ranks({{"a", 2}, {"a", 2}}, 2));
}
