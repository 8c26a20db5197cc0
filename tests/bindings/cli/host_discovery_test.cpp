// chorusrun's --host-discovery-script: the parse of what a script prints, and one bounded run of
// a real script (its output, a failing one, one that outlives its bound).
#include "bindings/cli/chorusrun/host_discovery.hpp"

#include <gtest/gtest.h>

using namespace chorus::chorusrun;
using namespace std::chrono_literals;

TEST(host_discovery, slots_on_this_host_are_summed_and_other_hosts_listed) {
  auto d = parse_discovery("localhost:2\n\nnode7:4\n  here  \n[::1]:3\n10.0.0.9\n", "here");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->local_slots, 2 + 1 + 3);
  EXPECT_EQ(d->other_hosts, (std::vector<std::string>{"node7", "10.0.0.9"}));
  auto bad = parse_discovery("localhost:zero\n", "here");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("'localhost:zero'"), std::string::npos);
  EXPECT_FALSE(parse_discovery("localhost:0\n", "here"));
}

TEST(host_discovery, a_script_runs_within_its_bound) {
  auto out = run_discovery_script("echo localhost:3", 5s);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(*out, "localhost:3\n");
  auto failed = run_discovery_script("echo no >&2; exit 3", 5s);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message().find("exit status 3"), std::string::npos);
  EXPECT_NE(failed.error().message().find("no"), std::string::npos);
  auto start = std::chrono::steady_clock::now();
  auto slow = run_discovery_script("sleep 5", 200ms);
  ASSERT_FALSE(slow);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_NE(slow.error().message().find("longer than 200 ms"), std::string::npos);
}

TEST(host_discovery, offered_slots_are_this_hosts_and_failures_and_other_hosts_are_said_once) {
  std::vector<std::string> said;
  auto say = [&](const std::string& m) { said.push_back(m); };
  EXPECT_EQ(offered_slots("echo localhost:4; echo far:2", "here", 5s, say), 4);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said.at(0).find("'far'"), std::string::npos);
  EXPECT_EQ(offered_slots("echo localhost:1", "here", 5s, say), 1);  // fewer: elastic_policy's to judge
  EXPECT_EQ(offered_slots("exit 1", "here", 5s, say), std::nullopt);
  EXPECT_NE(said.back().find("keeping the workers"), std::string::npos);
  EXPECT_EQ(offered_slots("echo localhost:x", "here", 5s, say), std::nullopt);
  EXPECT_NE(said.back().find("'localhost:x'"), std::string::npos);
}

TEST(host_discovery, a_new_worker_starts_like_the_first_with_its_own_id) {
  rank_launch first;
  first.rank = 0;
  first.argv = {"python3", "t.py"};
  first.env = {"A=1", "CHORUS_ELASTIC_WORKER=0"};
  first.inherit_fd = 7;
  auto l = new_worker_launch(first, 5);
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.argv, first.argv);
  EXPECT_EQ(l.env, (std::vector<std::string>{"A=1", "CHORUS_ELASTIC_WORKER=5"}));
  EXPECT_EQ(l.inherit_fd, -1);
}
