// The shared child-process helper itself (tests/support/child_process.hpp): the environment a
// child gets (names dropped, overrides), output read while the child runs, and the hard bound,
// scaled by CHORUS_TEST_TIME_FACTOR (tests/support/test_time.hpp), after which it is killed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "tests/support/child_process.hpp"

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

class child_process_test : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/chorus-child-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    int rc = std::system(("rm -rf '" + dir_ + "'").c_str());
    (void)rc;
  }
  child_process sh(const std::string& script, const child_process::env_map& env = {},
                   const std::vector<std::string>& unset = {}) {
    return child_process({"/bin/sh", "-c", script}, env, dir_ + "/out", dir_ + "/err", "", unset);
  }
  std::string dir_;
};

TEST_F(child_process_test, drops_the_names_it_is_told_to_and_sets_the_overrides) {
  ::setenv("CHORUS_CHILD_TEST_DROPPED", "dropped", 1);
  ::setenv("CHORUS_CHILD_TEST_KEPT", "kept", 1);
  ::setenv("CHORUS_CHILD_TEST_SET", "old", 1);
  auto p = sh("echo ${CHORUS_CHILD_TEST_DROPPED:-unset} $CHORUS_CHILD_TEST_KEPT $CHORUS_CHILD_TEST_SET; echo e >&2",
              {{"CHORUS_CHILD_TEST_SET", "new"}}, {"CHORUS_CHILD_TEST_DROPPED"});
  const exit_status& st = p.finish(10s);
  ::unsetenv("CHORUS_CHILD_TEST_DROPPED");
  ::unsetenv("CHORUS_CHILD_TEST_KEPT");
  ::unsetenv("CHORUS_CHILD_TEST_SET");
  ASSERT_TRUE(st.exited && st.exit_code == 0) << p.errors();
  EXPECT_EQ(p.output(), "unset kept new\n");
  EXPECT_EQ(p.errors(), "e\n");
}

TEST_F(child_process_test, read_until_sees_output_while_the_child_runs) {
  auto p = sh("echo first; echo warned >&2; exec sleep 30");
  EXPECT_TRUE(p.read_until([](const std::string& out, const std::string& err) {
    return out == "first\n" && err == "warned\n";
  }, 10s));
  EXPECT_FALSE(p.poll()) << "it should still run";
  p.kill_now(false);
  EXPECT_EQ(p.status().signal, SIGKILL);
}

TEST_F(child_process_test, read_until_stops_when_the_child_ends_without_it) {
  auto p = sh("echo other; exit 3");
  const auto start = child_process::clock::now();
  EXPECT_FALSE(p.read_until([](const std::string& out, const std::string&) { return out == "never\n"; }, 30s));
  EXPECT_LT(child_process::clock::now() - start, 10s) << "it waited for the bound, not for the child";
  EXPECT_TRUE(p.status().exited);
  EXPECT_EQ(p.status().exit_code, 3);
}

// The bound a test writes is `limit`; the child is killed after limit * CHORUS_TEST_TIME_FACTOR.
TEST_F(child_process_test, finish_kills_at_the_scaled_bound_and_says_so) {
  auto p = sh("exec sleep 30");
  const auto start = child_process::clock::now();
  const exit_status& st = p.finish(300ms);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(child_process::clock::now() - start);
  std::cout << "time factor " << time_factor << ": a 300 ms bound killed the child after " << took.count()
            << " ms\n";
  EXPECT_TRUE(st.timed_out);
  EXPECT_EQ(st.signal, SIGKILL);
  EXPECT_EQ(scaled(300ms), time_factor * 300ms);
  EXPECT_GE(took, scaled(300ms));
  EXPECT_LT(took, scaled(300ms) + 5s);
}

TEST_F(child_process_test, run_bounded_returns_both_streams_apart_and_the_status) {
  auto r = run_bounded({"/bin/sh", "-c", "echo out; echo err >&2; exit 5"}, dir_, 10s, true);
  EXPECT_FALSE(r.status.timed_out);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.exit_code, 5);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

}  // namespace
}  // namespace chorus::testing
