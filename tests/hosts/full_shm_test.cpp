// A full /dev/shm: two ranks under chorusrun in a private mount namespace whose /dev/shm is a
// 64 KiB tmpfs (so both see the same, too small one). The rings' budget (a quarter of the free
// space, shm/ring_budget.hpp) holds none, so every lane uses TCP, with a warning giving the
// figures; reserving the mailboxes fails (ENOSPC, no SIGBUS: segments are fallocated), with the
// reason; and the collectives stay exact. Root only (mount, unshare); skips otherwise. The
// namespace and its tmpfs vanish with the job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/support/shell_run.hpp"

namespace chorus::testing {
namespace {

const std::string tiny_shm =
    "unshare -m --propagation private sh -c 'mount -t tmpfs -o size=64k chorus-full-shm /dev/shm && ";

TEST(full_shm, lanes_fall_back_to_tcp_with_a_warning_and_results_stay_exact) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a private mount namespace with a 64 KiB /dev/shm";
  auto probe = run(tiny_shm + "df -k /dev/shm'");
  if (probe.exit_code != 0 || probe.out.find("chorus-full-shm") == std::string::npos)
    GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace here: " << probe.out;
  auto r = run("timeout 150 " + tiny_shm + "exec " CHORUSRUN_PATH " -np 2 --timeout 120 -- " CHORUS_TESTRANK_PATH
               " collectives'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("testrank: collectives exact"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << "no reason given:\n" << r.out;
  EXPECT_NE(r.out.find("rings on 0 of the"), std::string::npos) << "no fallback warning:\n" << r.out;
  EXPECT_NE(r.out.find("no mailbox to rank"), std::string::npos) << "no mailbox warning:\n" << r.out;
}

}  // namespace
}  // namespace chorus::testing
