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
