// Hierarchical allreduce and allgather across emulated hosts (bench/hosts/hosts.sh: namespaces
// with their own /dev/shm, so host identities really differ): 2x2, 2+1 and 3x1 (auto must run flat), every
// dtype and reduce op, sizes 0, 1, odd and several chunks, allgathers with counts differing by
// rank (chorus-testrank hier); a rank that SIGKILLs itself in the middle of a hierarchical
// allreduce or allgather is named by every other rank.
// Skips, saying why, where the machine cannot build hosts. Every run is bounded by `timeout`.
#include "tests/support/shell_run.hpp"
#include <gtest/gtest.h>

#include <string>
#include <unistd.h>

namespace {

using chorus::testing::run;
using chorus::testing::run_result;

const std::string hosts_sh = CHORUS_HOSTS_SH_PATH;

// Runs `inner` (sh) inside fresh hosts, one per entry of `per_host`, with $HOSTS set for
// chorusrun -H ("10.77.0.1:2,10.77.0.2:1") and $LAUNCH its launcher template.
run_result on_hosts(const std::vector<int>& per_host, const std::string& inner, int limit_s) {
  char path[] = "/tmp/chorus-hier-hosts-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return {};
  std::string script = "set -- $(echo $CHORUS_HOSTS_ADDRS | tr , ' ')\nHOSTS=";
  for (std::size_t h = 0; h < per_host.size(); ++h)
    script += (h ? ",$" : "$") + std::to_string(h + 1) + ":" + std::to_string(per_host[h]);
  script += "\nLAUNCH='" + hosts_sh + " exec {host}'\n" + inner + "\n";
  bool ok = ::write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  ::close(fd);
  run_result r;
  if (ok)
    r = run("timeout -s TERM -k 10 " + std::to_string(limit_s) + " " + hosts_sh + " run " +
            std::to_string(per_host.size()) + " -- sh " + path);
  ::unlink(path);
  return r;
}

class hier_hosts : public ::testing::Test {
 protected:
  void SetUp() override {
    auto check = run(hosts_sh + " check");
    if (check.exit_code != 0) GTEST_SKIP() << "emulated hosts unavailable: " << check.out;
  }
  // chorus-testrank hier on hosts of `per_host` ranks each; every rank must pass and print
  // `groups` and what auto runs at 64 MiB.
  void exact(const std::vector<int>& per_host, const std::string& groups, const std::string& large,
             const std::string& gather) {
    int n = 0;
    for (int v : per_host) n += v;
    auto r = on_hosts(per_host,
                      std::string("exec ") + CHORUSRUN_PATH + " -np " + std::to_string(n) +
                          " -H $HOSTS --launcher \"$LAUNCH\" --timeout 90 -x CHORUS_CHUNK_BYTES=65536 --streams 2 -- " +
                          CHORUS_TESTRANK_PATH + " hier",
                      120);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    for (int rank = 0; rank < n; ++rank) {
      std::string tag = "[" + std::to_string(rank) + "] testrank: ";
      EXPECT_NE(r.out.find(tag + "hosts " + groups + "; auto runs recursive_doubling at 4 KiB and " + large), std::string::npos)
          << r.out;
      EXPECT_NE(r.out.find(tag + "allgather auto runs " + gather), std::string::npos) << r.out;
      EXPECT_NE(r.out.find(tag + "hier exact on rank " + std::to_string(rank)), std::string::npos) << r.out;
    }
  }
};

}  // namespace

TEST_F(hier_hosts, two_by_two_is_exact) {
  exact({2, 2}, "2 hosts: [0,1] [2,3]", "hier_sharded", "hier_allgather");
}
TEST_F(hier_hosts, two_plus_one_is_exact) { exact({2, 1}, "2 hosts: [0,1] [2]", "hier_sharded", "hier_allgather"); }
TEST_F(hier_hosts, three_by_one_runs_flat_under_auto) {
  exact({1, 1, 1}, "3 hosts: [0] [1] [2]", "ring", "ring_allgather");
}

// Ranks started one by one (not by chorusrun, which would stop the victim's neighbours), so
// every survivor's own verdict is seen. Rank 3 SIGKILLs itself in its 4th allreduce or allgather
// (chorus-testrank `loop`: hier-loop or hier-gather-loop).
static void killed_mid_op_is_named(const std::string& loop) {
  std::string script =
      "d=$(mktemp -d)\n"
      "export CHORUS_JOB_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \\n') CHORUS_SIZE=4 CHORUS_LOCAL_SIZE=2 "
      "CHORUS_RENDEZVOUS=$1:29613 CHORUS_TEST_KILL=3:3 CHORUS_PEER_TIMEOUT_SECONDS=6\n"
      "for r in 0 1 2 3; do h=$(( r / 2 )); CHORUS_RANK=$r CHORUS_LOCAL_RANK=$(( r % 2 )) " + hosts_sh +
      " exec $h " + CHORUS_TESTRANK_PATH + " " + loop + " 60 >$d/out.$r 2>&1 & eval p$r=$!; done\n"
      "wait $p0; e0=$?; wait $p1; e1=$?; wait $p2; e2=$?; wait $p3; e3=$?\n"
      "echo exits=$e0,$e1,$e2,$e3\n"
      "for r in 0 1 2 3; do sed \"s/^/[$r] /\" $d/out.$r; done; rm -rf $d\n";
  auto r = on_hosts({2, 2}, script, 120);
  EXPECT_NE(r.out.find("exits=3,3,3,137"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[3] testrank: killing myself"), std::string::npos) << r.out;
  for (int rank : {0, 1, 2}) {
    std::string tag = "[" + std::to_string(rank) + "] testrank error: connection_lost";
    auto at = r.out.find(tag);
    ASSERT_NE(at, std::string::npos) << r.out;
    auto line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find("rank 3"), std::string::npos) << "rank " << rank << " does not name rank 3: " << line;
  }
}

TEST_F(hier_hosts, a_rank_killed_mid_allreduce_is_named_by_every_other_rank) { killed_mid_op_is_named("hier-loop"); }
TEST_F(hier_hosts, a_rank_killed_mid_allgather_is_named_by_every_other_rank) {
  killed_mid_op_is_named("hier-gather-loop");
}
