// chorusrun's host blacklist (host_blacklist.hpp) against Horovod 0.28's HostState: the cooldown
// formula and its growth with failures, a failure inside a cooldown, expiry and readmission with
// the count kept, no cooldown range (out for good), and placement skipping blocked hosts. The
// clock is a time point the test moves; the jitter is a value the test sets.
#include "bindings/cli/chorusrun/host_blacklist.hpp"

#include <gtest/gtest.h>

#include "bindings/cli/chorusrun/elastic_policy.hpp"

using namespace chorus::chorusrun;
using namespace std::chrono_literals;
using tp = host_blacklist::clock::time_point;

namespace {

double seconds(std::chrono::duration<double> d) { return d.count(); }

tp at(double s) { return tp{} + std::chrono::duration_cast<tp::duration>(std::chrono::duration<double>(s)); }

}  // namespace

TEST(host_blacklist, cooldown_is_min_times_two_to_the_failures_plus_jitter_within_the_range) {
  const cooldown_range r{10, 100};
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(1, r, 0.0)), 20.0);  // not MIN: Horovod counts before it doubles
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(1, r, 0.5)), 25.0);
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(2, r, 0.0)), 40.0);
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(3, r, 0.99)), 89.9);
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(4, r, 0.0)), 100.0);    // capped at MAX
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(1000, r, 0.9)), 100.0);  // no overflow
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(1, {5, 5}, 0.7)), 5.0);  // MIN == MAX: always that
  EXPECT_DOUBLE_EQ(seconds(cooldown_after(1, {3, 4}, 0.0)), 4.0);
}

TEST(host_blacklist, without_a_range_a_host_stays_out_for_the_jobs_life) {
  host_blacklist b(std::nullopt, [] { return 0.0; });
  EXPECT_FALSE(b.blocked("a", at(0)));
  EXPECT_EQ(b.add("a", at(1)), std::nullopt);
  EXPECT_TRUE(b.blocked("a", at(1)));
  EXPECT_TRUE(b.blocked("a", at(1e6)));
  EXPECT_TRUE(b.readmit(at(1e6)).empty());
  EXPECT_FALSE(b.blocked("b", at(1e6)));
  EXPECT_EQ(b.failures("a"), 0);
  EXPECT_EQ(b.blocked_hosts(at(5)), (std::vector<std::string>{"a"}));
}

TEST(host_blacklist, a_host_comes_back_after_its_cooldown_and_the_next_one_is_longer) {
  double jitter = 0.0;
  host_blacklist b(cooldown_range{10, 100}, [&] { return jitter; });
  EXPECT_EQ(b.add("a", at(0)), at(20));
  EXPECT_EQ(b.failures("a"), 1);
  EXPECT_TRUE(b.blocked("a", at(19.9)));
  EXPECT_TRUE(b.readmit(at(19.9)).empty());
  EXPECT_FALSE(b.blocked("a", at(20)));  // over: placeable even before readmit
  EXPECT_EQ(b.readmit(at(20)), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(b.readmit(at(21)).empty());  // once
  EXPECT_TRUE(b.blocked_hosts(at(21)).empty());
  jitter = 0.5;
  EXPECT_EQ(b.add("a", at(30)), at(30 + 45));  // failure 2: 10 * 4 + 0.5 * 10
  EXPECT_EQ(b.failures("a"), 2);
  EXPECT_TRUE(b.blocked("a", at(74)));
  EXPECT_EQ(b.readmit(at(75)), (std::vector<std::string>{"a"}));
  EXPECT_EQ(b.add("a", at(100)), at(185));  // failure 3: 10 * 8 + 5; failure 4 is capped at MAX
  EXPECT_EQ(b.readmit(at(185)), (std::vector<std::string>{"a"}));
  EXPECT_EQ(b.add("a", at(190)), at(290));
  EXPECT_EQ(b.failures("a"), 4);
}

TEST(host_blacklist, a_failure_inside_a_cooldown_neither_counts_nor_lengthens_it) {
  host_blacklist b(cooldown_range{10, 100}, [] { return 0.0; });
  EXPECT_EQ(b.add("a", at(0)), at(20));
  EXPECT_EQ(b.add("a", at(15)), at(20));
  EXPECT_EQ(b.failures("a"), 1);
  // Over but not yet readmitted (no discovery run between): a failure then starts a new one.
  EXPECT_EQ(b.add("a", at(25)), at(65));
  EXPECT_EQ(b.failures("a"), 2);
}

TEST(host_blacklist, hosts_are_independent_and_placement_skips_the_blocked_ones) {
  host_blacklist b(cooldown_range{1, 3600}, [] { return 0.0; });
  b.add("b", at(0));
  const std::vector<host_slots> offered = {{"a", 2}, {"b", 2}, {"c", 1}};
  auto usable = b.without_blocked(offered, at(1));
  ASSERT_EQ(usable.size(), 2u);
  EXPECT_EQ(usable[0].host, "a");
  EXPECT_EQ(usable[1].host, "c");
  EXPECT_EQ(b.blocked_hosts(at(1)), (std::vector<std::string>{"b"}));
  // Workers 0, 1 on a and 2 on c (b's were stopped): one new worker, on a free slot of a host
  // that is not blocked, never on b.
  auto plan = plan_slots({{0, "a"}, {2, "c"}}, usable, 2, 4);
  EXPECT_EQ(plan.start, (std::vector<std::string>{"a"}));
  EXPECT_EQ(b.without_blocked(offered, at(2)).size(), 3u);  // b's cooldown (2 s) is over
  EXPECT_FALSE(b.blocked("a", at(1)));
  EXPECT_EQ(b.failures("c"), 0);
}
