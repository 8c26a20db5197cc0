// Jobs across emulated hosts (bench/hosts/hosts.sh: network namespaces with their own /dev/shm,
// shaped links): chorusrun -H with the namespace launcher. Skips, saying why, where the machine
// cannot build hosts (not root, no ip netns, no htb). Every run is `hosts.sh run` (its trap
// removes the namespaces, also on failure or timeout) under `timeout`, a hard bound.
#include "tests/support/shell_run.hpp"
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using chorus::testing::run;
using chorus::testing::run_result;

const std::string hosts_sh = CHORUS_HOSTS_SH_PATH;

// `inner` (a sh script) runs inside `hosts` fresh hosts with $HOSTS (e.g. "10.77.0.1:2,10.77.0.2:2")
// and $LAUNCH set; the whole run is bounded by `limit_s` seconds.
run_result on_hosts(int hosts, const std::string& inner, int ranks_per_host, int limit_s) {
  char path[] = "/tmp/chorus-hosts-test-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return {};
  std::string per = std::to_string(ranks_per_host);
  std::string script = "HOSTS=$(echo $CHORUS_HOSTS_ADDRS | sed 's/,/:" + per + ",/g'):" + per + "\nLAUNCH='" +
                       hosts_sh + " exec {host}'\n" + inner + "\n";
  bool ok = ::write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  ::close(fd);
  run_result r;
  if (ok)
    r = run("timeout -s TERM -k 10 " + std::to_string(limit_s) + " " + hosts_sh + " run " + std::to_string(hosts) +
            " -- sh " + path);
  ::unlink(path);
  return r;
}

run_result on_two_hosts(const std::string& inner, int ranks_per_host, int limit_s = 150) {
  return on_hosts(2, inner, ranks_per_host, limit_s);
}

class hosts_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto check = run(hosts_sh + " check");
    if (check.exit_code != 0) GTEST_SKIP() << "emulated hosts unavailable: " << check.out;
  }
};

}  // namespace

TEST_F(hosts_test, collectives_are_exact_with_lanes_inside_hosts_only) {
  auto r = on_two_hosts(std::string("exec ") + CHORUSRUN_PATH + " -np 4 -H $HOSTS --launcher \"$LAUNCH\" --timeout 120 -- " +
                            CHORUS_TESTRANK_PATH + " collectives",
                        2);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Each rank shares a host with exactly one other rank: its S streams to that rank have rings,
  // none of the 2S to the other host's ranks does.
  // Frames went through the rings, and no rank tried a ring to the other host (a rank that
  // did would log that it cannot open the segment, then fall back to TCP).
  std::regex line(
      R"(testrank: collectives exact on rank (\d) of 4, (\d+) streams, (\d+) through shared memory \(frames (\d+))");
  std::set<int> ranks;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
    ranks.insert(std::stoi((*it)[1]));
    EXPECT_EQ(std::stoi((*it)[3]), std::stoi((*it)[2])) << "rank " << (*it)[1] << ":\n" << r.out;
    EXPECT_GT(std::stoll((*it)[4]), 0) << "rank " << (*it)[1] << ":\n" << r.out;
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << r.out;
  EXPECT_EQ(r.out.find("cannot open shared-memory segment"), std::string::npos) << r.out;
}

// Host i is named chorus-host<i> (a UTS namespace of its own), and every host resolves every
// host's name to its address (its own /etc/hosts), also when entered from another host (a
// launcher there); this machine's host name and /etc/hosts are the same before, during and after.
TEST_F(hosts_test, hosts_have_names_that_every_host_resolves) {
  const std::string machine = "echo machine $(hostname) $(md5sum </etc/hosts | cut -c1-32)";
  const std::string names = "getent hosts chorus-host0 chorus-host1 | tr -s \" \" | paste -sd\\; -";
  auto before = run(machine);
  auto r = on_two_hosts("echo tag $CHORUS_HOSTS_TAG\n" + hosts_sh + " names\n" +
                            "for h in 0 1 chorus-host1; do " + hosts_sh + " exec $h sh -c 'echo on $(hostname) $(" +
                            names + ")'; done\n" + hosts_sh + " exec 0 " + hosts_sh + " exec 1 sh -c 'echo nested $(hostname)'\n" +
                            machine + "\n",
                        1, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::smatch tag;
  ASSERT_TRUE(std::regex_search(r.out, tag, std::regex(R"(tag (chorus-h\d+-)\n)"))) << r.out;
  // Nothing of this harness stays mounted (its state dir, the hosts' mount and UTS namespaces).
  auto after = run(machine + "; echo mounts $(grep -c " + tag[1].str() + " /proc/self/mountinfo)");
  const std::string resolved = " 10.77.0.1 chorus-host0;10.77.0.2 chorus-host1\n";
  EXPECT_NE(r.out.find("chorus-host0,chorus-host1\n"), std::string::npos) << "hosts.sh names:\n" << r.out;
  EXPECT_NE(r.out.find("on chorus-host0" + resolved), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on chorus-host1" + resolved + "on chorus-host1" + resolved), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nested chorus-host1\n"), std::string::npos) << r.out;
  ASSERT_EQ(before.out.rfind("machine ", 0), 0u) << before.out;
  EXPECT_NE(r.out.find(before.out), std::string::npos) << "the machine's name or /etc/hosts changed:\n" << r.out;
  EXPECT_EQ(after.out, before.out + "mounts 0\n") << "after the run";
}

TEST_F(hosts_test, ranks_see_their_host_numbering_and_a_private_dev_shm) {
  auto r = on_two_hosts(std::string("exec ") + CHORUSRUN_PATH + " -np 4 -H $HOSTS --launcher \"$LAUNCH\" --timeout 60 -- " +
                            "sh -c 'echo vars $HOROVOD_RANK $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE "
                            "$HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE $HOROVOD_HOSTNAME $(stat -c %d /dev/shm) "
                            "${#CHORUS_JOB_SECRET} $CHORUS_RENDEZVOUS'",
                        2);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::regex line(R"(\[(\d)\] vars (\d) (\d) 2 (\d) 2 (\S+) (\d+) 64 10\.77\.0\.1:\d+)");
  std::string shm_of_host[2];
  int seen = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it, ++seen) {
    int rank = std::stoi((*it)[1]);
    EXPECT_EQ(std::stoi((*it)[2]), rank);
    EXPECT_EQ(std::stoi((*it)[3]), rank % 2);
    EXPECT_EQ(std::stoi((*it)[4]), rank / 2);
    EXPECT_EQ((*it)[5], "10.77.0." + std::to_string(rank / 2 + 1));
    auto& shm = shm_of_host[rank / 2];
    if (shm.empty()) shm = (*it)[6];
    EXPECT_EQ(shm, (*it)[6]) << "ranks on one host see one /dev/shm";
  }
  EXPECT_EQ(seen, 4) << r.out;
  EXPECT_NE(shm_of_host[0], shm_of_host[1]) << r.out;
}

TEST_F(hosts_test, a_failing_rank_stops_the_job_naming_rank_and_host) {
  auto r = on_two_hosts(std::string("exec ") + CHORUSRUN_PATH + " -np 2 -H $HOSTS --launcher \"$LAUNCH\" --timeout 60 -- " +
                            "sh -c '[ $CHORUS_RANK = 1 ] && exit 7; sleep 50'",
                        1, 90);
  EXPECT_EQ(r.exit_code, 7) << r.out;
  EXPECT_NE(r.out.find("rank 1 on host 10.77.0.2 exited with status 7"), std::string::npos) << r.out;
}

TEST_F(hosts_test, shaping_has_a_capped_class_per_bucket_and_the_asked_slow_fraction) {
  char path[] = "/tmp/chorus-hosts-tc-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string script = "tc -n ${CHORUS_HOSTS_TAG}1 class show dev eth0\ntc -n ${CHORUS_HOSTS_TAG}sw class show dev p1\n";
  ASSERT_EQ(::write(fd, script.data(), script.size()), static_cast<ssize_t>(script.size()));
  ::close(fd);
  auto r = run("timeout -s TERM -k 10 60 " + hosts_sh + " run 2 --slow-fraction 0.25 -- sh " + path);
  ::unlink(path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Both directions of host 1's link: 64 buckets each, 16 of them slow, under a 4 Gbit/s link.
  std::regex fast(R"(class htb 1:[0-9a-f]+ parent 1:1 (leaf \S+ )?prio \d+ rate \S+ ceil 1Gbit)");
  std::regex slow(R"(class htb 1:[0-9a-f]+ parent 1:1 (leaf \S+ )?prio \d+ rate \S+ ceil 250Mbit)");
  std::regex link(R"(class htb 1:1 root rate 4Gbit ceil 4Gbit)");
  auto count = [&](const std::regex& re) {
    return std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), re), std::sregex_iterator());
  };
  EXPECT_EQ(count(fast), 2 * 48) << r.out;
  EXPECT_EQ(count(slow), 2 * 16) << r.out;
  EXPECT_EQ(count(link), 2) << r.out;
}

TEST_F(hosts_test, reshape_changes_the_caps_of_hosts_that_are_up) {
  char path[] = "/tmp/chorus-hosts-tc-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string script = hosts_sh + " reshape --flow 500mbit --slow-fraction 0.25\n" +
                       "tc -n ${CHORUS_HOSTS_TAG}1 class show dev eth0\ntc -n ${CHORUS_HOSTS_TAG}sw class show dev p1\n" +
                       hosts_sh + " status\n";
  ASSERT_EQ(::write(fd, script.data(), script.size()), static_cast<ssize_t>(script.size()));
  ::close(fd);
  auto r = run("timeout -s TERM -k 10 60 " + hosts_sh + " run 2 -- sh " + path);
  ::unlink(path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::regex fast(R"(class htb 1:[0-9a-f]+ parent 1:1 (leaf \S+ )?prio \d+ rate \S+ ceil 500Mbit)");
  std::regex slow(R"(class htb 1:[0-9a-f]+ parent 1:1 (leaf \S+ )?prio \d+ rate \S+ ceil 250Mbit)");
  auto count = [&](const std::regex& re) {
    return std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), re), std::sregex_iterator());
  };
  EXPECT_EQ(count(fast), 2 * 48) << r.out;
  EXPECT_EQ(count(slow), 2 * 16) << r.out;
  EXPECT_NE(r.out.find("flow=500mbit"), std::string::npos) << "status shows the new shaping:\n" << r.out;
}

TEST_F(hosts_test, per_node_mode_one_chorusrun_on_each_host) {
  // As a scheduler would: the same secret exported on both nodes, one chorusrun per node.
  std::string run_node = std::string(CHORUSRUN_PATH) + " --nnodes 2 --rendezvous 10.77.0.1:29611 -np 2 --timeout 90";
  auto r = on_two_hosts("export CHORUS_JOB_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \\n')\n" + hosts_sh +
                            " exec 0 " + run_node + " --node-rank 0 -- " + CHORUS_TESTRANK_PATH + " collectives &\n" +
                            hosts_sh + " exec 1 " + run_node + " --node-rank 1 -- " + CHORUS_TESTRANK_PATH +
                            " collectives\nb=$?\nwait $!\na=$?\nexit $((a + b))",
                        2);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (int rank = 0; rank < 4; ++rank) {
    std::string want = "[" + std::to_string(rank) + "] testrank: collectives exact on rank " + std::to_string(rank) + " of 4";
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST_F(hosts_test, a_host_whose_link_goes_down_is_named_by_the_other_ranks) {
  // One chorusrun per host (per-node mode), so every rank's own verdict is seen; rank 2's link
  // goes down after its third 16 MiB allreduce. CHORUS_PEER_TIMEOUT_SECONDS bounds detection.
  std::string node = std::string(CHORUSRUN_PATH) + " --nnodes 3 --rendezvous 10.77.0.1:29612 -np 1 --timeout 150";
  std::string script =
      "export CHORUS_JOB_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \\n') CHORUS_PEER_TIMEOUT_SECONDS=6\n"
      "d=$(mktemp -d)\n"
      "for n in 0 1 2; do " + hosts_sh + " exec $n " + node + " --node-rank $n -- " + CHORUS_TESTRANK_PATH +
      " allreduce-loop 120 >$d/out.$n 2>&1 & eval p$n=$!; done\n"
      "i=0; while ! grep -q 'iteration 3' $d/out.2 && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n"
      "start=$(date +%s)\n"
      "ip -n ${CHORUS_HOSTS_TAG}2 link set eth0 down\n"
      "wait $p0; e0=$?; wait $p1; e1=$?\n"
      "echo elapsed=$(( $(date +%s) - start )) exits=$e0,$e1\n"
      "kill $p2 2>/dev/null; wait $p2\n"
      "cat $d/out.0 $d/out.1; rm -rf $d\n";
  auto r = on_hosts(3, script, 1, 180);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(elapsed=(\d+) exits=(\d+),(\d+))"))) << r.out;
  EXPECT_LE(std::stoi(m[1]), 60) << r.out;
  EXPECT_EQ(m[2], "3") << r.out;  // chorus-testrank's exit status on an error
  EXPECT_EQ(m[3], "3") << r.out;
  for (int rank : {0, 1}) {
    std::regex err("\\[" + std::to_string(rank) + "\\] testrank error: [^\\n]*rank 2");
    EXPECT_TRUE(std::regex_search(r.out, err)) << "rank " << rank << " does not name rank 2:\n" << r.out;
  }
}

// hosts.sh up and reshape and both benchmark scripts read the shaping options through one parser
// (parse_shaping in bench/hosts/shape.sh): a bad value gets the same message from each.
TEST_F(hosts_test, every_command_refuses_a_bad_shaping_option_alike) {
  const std::string dir = hosts_sh.substr(0, hosts_sh.rfind('/'));
  auto refused = [&](const std::string& cmd, int code, const std::string& message) {
    auto r = run(cmd + " 2>&1");
    EXPECT_EQ(r.exit_code, code) << cmd << ":\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << cmd << ":\n" << r.out;
  };
  const std::string bench = "bash " + dir + "/bench_hosts.sh /nonexistent 2";
  refused(hosts_sh + " up 2 --link 4gbits", 1, "hosts.sh up: --link '4gbits' is not a rate like 4gbit");
  refused(hosts_sh + " up 2 --port-bits 8", 1, "hosts.sh up: --port-bits must be 1..7, got '8'");
  refused(bench + " --sizes 1M --flow 1xbit", 2, "bench --emulated-hosts: --flow '1xbit' is not a rate like 4gbit");
  refused(bench + " --port-bits x", 2, "bench --emulated-hosts: --port-bits must be 1..7, got 'x'");
  refused(bench + " --slow", 2, "bench --emulated-hosts: --slow needs a value");
  refused("bash " + dir + "/bench_autotune.sh /nonexistent --emulated-hosts 2 --slow-fraction 1.5", 2,
          "bench-autotune: --slow-fraction must be in [0, 1], got '1.5'");
  // reshape needs hosts that are up; a bad option there changes nothing.
  auto r = run("timeout -s TERM -k 10 60 " + hosts_sh + " run 2 -- sh -c '" + hosts_sh +
               " reshape --slow 9q 2>&1; echo rc=$?; " + hosts_sh + " reshape --bogus 2>&1; echo rc=$?; " + hosts_sh +
               " status' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("hosts.sh reshape: --slow '9q' is not a rate like 4gbit\nrc=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reshape: unknown option '--bogus'\nrc=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("slow=250mbit"), std::string::npos) << r.out;
}
