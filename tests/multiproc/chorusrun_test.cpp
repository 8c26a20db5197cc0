// Multi-process tests of the chorusrun launcher: the real binary starts real ranks (sh).
// chorusrun runs as a child_process (tests/support/child_process.hpp) with a hard time bound
// (scaled in slow builds); one that outlives it is killed by pid, and rank pids the ranks report
// are killed in TearDown if a failed test left them alive.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/bind_probe.hpp"
#include "tests/support/child_process.hpp"

namespace {

using namespace std::chrono_literals;
using chorus::testing::bind_errno;
using chorus::testing::child_process;
using chorus::testing::exit_status;
using steady = std::chrono::steady_clock;

// Generous bound for one chorusrun run (scaled in slow builds); the tests expect far less.
constexpr auto run_limit = 30s;

struct run_result {
  int exit_code = -1;      // exit status, or 128 + signal if chorusrun itself was killed
  bool timed_out = false;  // the hard bound (scaled, test_time.hpp) expired and chorusrun was killed
  std::string out;
  std::string err;
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  auto lines = split_lines(text);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Values of `key=` found in `text`, e.g. all pids printed as "pid=123".
std::vector<pid_t> pids_after(const std::string& text, const std::string& key) {
  std::vector<pid_t> pids;
  std::regex re(key + "=([0-9]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    pids.push_back(static_cast<pid_t>(std::stol((*it)[1])));
  }
  return pids;
}

// True once `pid` no longer runs. A zombie counts as gone: an orphaned grandchild is reaped
// by init, which may take a while in a container.
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return true;
  char state = '?';
  int matched = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return matched == 1 && state == 'Z';
}

// Waits (bounded) for every pid to be gone; returns those still running.
std::vector<pid_t> still_running(const std::vector<pid_t>& pids, std::chrono::milliseconds wait) {
  auto deadline = steady::now() + wait;
  std::vector<pid_t> alive;
  do {
    alive.clear();
    for (pid_t p : pids) {
      if (!process_gone(p)) alive.push_back(p);
    }
    if (alive.empty()) break;
    std::this_thread::sleep_for(20ms);
  } while (steady::now() < deadline);
  return alive;
}

// Waits for chorusrun to end, killing it at `limit`; what it printed and how it ended.
run_result finish(child_process& job, std::chrono::milliseconds limit = run_limit) {
  const exit_status& st = job.finish(limit);
  return {st.exited ? st.exit_code : 128 + st.signal, st.timed_out, job.output(), job.errors()};
}

class chorusrun_test : public ::testing::Test {
 protected:
  // Every test gets a scratch folder: chorusrun's output files, and the ranks' $DIR.
  void SetUp() override {
    char tmpl[] = "/tmp/chorusrun_test.XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    ASSERT_NE(dir, nullptr) << std::strerror(errno);
    scratch_dir_ = dir;
  }

  void TearDown() override {
    // Only a failed test leaves ranks behind; never leave them to the next test.
    for (pid_t p : rank_pids_) {
      if (!process_gone(p)) ::kill(p, SIGKILL);
    }
    if (!scratch_dir_.empty()) {
      if (DIR* d = ::opendir(scratch_dir_.c_str())) {
        while (dirent* e = ::readdir(d)) {
          std::string name = e->d_name;
          if (name != "." && name != "..") ::unlink((scratch_dir_ + "/" + name).c_str());
        }
        ::closedir(d);
      }
      ::rmdir(scratch_dir_.c_str());
    }
  }

  // Starts chorusrun with `args`. Its environment is the test's own without CHORUS_JOB_SECRET
  // and CHORUS_RENDEZVOUS, plus `extra_env`; stdout and stderr go to files in the scratch folder.
  child_process start_chorusrun(const std::vector<std::string>& args, const child_process::env_map& extra_env = {}) {
    std::vector<std::string> argv{CHORUSRUN_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return child_process(argv, extra_env, scratch_dir_ + "/chorusrun.out", scratch_dir_ + "/chorusrun.err", "",
                         {"CHORUS_JOB_SECRET", "CHORUS_RENDEZVOUS"});
  }

  // One chorusrun run to its end, bounded by run_limit.
  run_result run_chorusrun(const std::vector<std::string>& args, const child_process::env_map& extra_env = {}) {
    child_process job = start_chorusrun(args, extra_env);
    return finish(job);
  }

  // Records the "pid=" and "child=" pids ranks printed, for TearDown.
  void remember_pids(const std::string& out) {
    for (const char* key : {"pid", "child"}) {
      for (pid_t p : pids_after(out, key)) {
        if (std::find(rank_pids_.begin(), rank_pids_.end(), p) == rank_pids_.end()) {
          rank_pids_.push_back(p);
        }
      }
    }
  }

  std::vector<pid_t> rank_pids_;  // every pid ranks reported, killed in TearDown if alive
  std::string scratch_dir_;
};

// Ranks that print their shell's pid and a grandchild's pid, then wait for the grandchild.
const std::string sleeping_rank =
    "echo pid=$$; sleep 30 & echo child=$!; touch \"$DIR/ready.$CHORUS_RANK\" 2>/dev/null; wait";

TEST_F(chorusrun_test, every_rank_gets_its_rank_and_size) {
  auto r = run_chorusrun({"-np", "3", "--", "sh", "-c",
                          "echo rank=$CHORUS_RANK size=$CHORUS_SIZE "
                          "local=$CHORUS_LOCAL_RANK/$CHORUS_LOCAL_SIZE"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[0] rank=0 size=3 local=0/3",
                                                           "[1] rank=1 size=3 local=1/3",
                                                           "[2] rank=2 size=3 local=2/3"}));
  EXPECT_EQ(r.err, "");
}

TEST_F(chorusrun_test, ranks_share_a_fresh_secret_rendezvous_and_job_id) {
  const std::vector<std::string> args = {
      "-np", "3", "--", "sh", "-c",
      "echo secret=$CHORUS_JOB_SECRET rdv=$CHORUS_RENDEZVOUS id=$CHORUS_JOB_ID"};
  const std::regex line_re(
      R"(\[([0-2])\] secret=([0-9a-f]{64}) rdv=(127\.0\.0\.1:[0-9]+) id=([0-9a-f]{16}))");
  std::vector<std::string> secrets, ids;
  for (int run = 0; run < 2; ++run) {
    auto r = run_chorusrun(args);
    ASSERT_FALSE(r.timed_out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto lines = sorted_lines(r.out);
    ASSERT_EQ(lines.size(), 3u) << r.out;
    std::map<std::string, int> secret_seen, rdv_seen, id_seen;
    for (size_t i = 0; i < lines.size(); ++i) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(lines[i], m, line_re)) << lines[i];
      EXPECT_EQ(m[1], std::to_string(i));
      ++secret_seen[m[2]];
      ++rdv_seen[m[3]];
      ++id_seen[m[4]];
    }
    ASSERT_EQ(secret_seen.size(), 1u) << r.out;
    EXPECT_EQ(rdv_seen.size(), 1u) << r.out;
    ASSERT_EQ(id_seen.size(), 1u) << r.out;
    secrets.push_back(secret_seen.begin()->first);
    ids.push_back(id_seen.begin()->first);
  }
  EXPECT_NE(secrets[0], secrets[1]);
  EXPECT_NE(ids[0], ids[1]);
}

TEST_F(chorusrun_test, keeps_secret_and_rendezvous_from_its_environment) {
  const std::string secret(64, 'a');
  auto r = run_chorusrun(
      {"-np", "2", "--", "sh", "-c", "echo $CHORUS_JOB_SECRET $CHORUS_RENDEZVOUS"},
      {{"CHORUS_JOB_SECRET", secret}, {"CHORUS_RENDEZVOUS", "127.0.0.1:4711"}});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[0] " + secret + " 127.0.0.1:4711",
                                                           "[1] " + secret + " 127.0.0.1:4711"}));
}

TEST_F(chorusrun_test, failing_rank_stops_the_others) {
  // Rank 1 fails only once ranks 0 and 2 have printed their pids and started sleeping.
  const std::string dir = scratch_dir_;
  const std::string script =
      "if [ \"$CHORUS_RANK\" = 1 ]; then i=0;"
      " while [ ! -e \"$DIR/ready.0\" ] || [ ! -e \"$DIR/ready.2\" ]; do"
      "  i=$((i+1)); [ $i -gt 200 ] && exit 4; sleep 0.05; done;"
      " echo failing >&2; exit 3; fi; " +
      sleeping_rank;
  auto start = steady::now();
  auto r = run_chorusrun({"-np", "3", "-x", "DIR=" + dir, "--", "sh", "-c", script});
  auto elapsed = steady::now() - start;
  auto shells = pids_after(r.out, "pid");
  auto children = pids_after(r.out, "child");
  remember_pids(r.out);

  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(elapsed, 10s);
  EXPECT_NE(r.err.find("[1] failing\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chorusrun: rank 1 exited with status 3; stopping the job"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("sending SIGKILL"), std::string::npos) << "SIGTERM was lost\n" << r.err;
  ASSERT_EQ(shells.size(), 2u) << r.out;
  ASSERT_EQ(children.size(), 2u) << r.out;
  // The rank shells were reaped by chorusrun before it exited: no such process any more.
  for (pid_t p : shells) {
    errno = 0;
    EXPECT_EQ(::kill(p, 0), -1) << "rank pid " << p << " still exists";
    EXPECT_EQ(errno, ESRCH);
  }
  // Their children died with their process groups.
  EXPECT_EQ(still_running(children, 3000ms), std::vector<pid_t>{});
}

TEST_F(chorusrun_test, rank_killed_by_a_signal_fails_the_job) {
  auto r = run_chorusrun({"-np", "2", "--", "sh", "-c",
                          "if [ \"$CHORUS_RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 30"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("chorusrun: rank 0 was killed by signal 9"), std::string::npos) << r.err;
  // Rank 1 may still be between fork and exec when it is told to stop; the signal must not
  // be lost there (only the end of the grace period sends SIGKILL).
  EXPECT_EQ(r.err.find("sending SIGKILL"), std::string::npos) << "SIGTERM was lost\n" << r.err;
}

TEST_F(chorusrun_test, rank_ignoring_sigterm_is_killed_after_the_grace_period) {
  auto start = steady::now();
  auto r = run_chorusrun({"--timeout", "0.2", "-np", "2", "--", "sh", "-c",
                          "trap '' TERM; exec sleep 30"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_LT(steady::now() - start, 10s);
  EXPECT_NE(r.err.find("rank(s) 0 1 still running 3 s after being asked to stop; sending SIGKILL"),
            std::string::npos)
      << r.err;
}

TEST_F(chorusrun_test, second_signal_kills_at_once) {
  child_process job = start_chorusrun({"-np", "2", "--", "sh", "-c",
                         "trap '' TERM INT; echo pid=$$; exec sleep 30"});
  bool started = job.read_until(
      [](const std::string& out, const std::string&) { return pids_after(out, "pid").size() == 2; }, 10s);
  remember_pids(job.output());
  ASSERT_TRUE(started) << "ranks did not report their pids in time";
  ASSERT_EQ(::kill(job.pid(), SIGTERM), 0);
  ASSERT_TRUE(job.read_until(
      [](const std::string&, const std::string& err) { return err.find("received SIGTERM") != std::string::npos; },
      10s));
  ASSERT_EQ(::kill(job.pid(), SIGINT), 0);
  auto r = finish(job);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
  EXPECT_NE(r.err.find("received SIGINT while stopping; killing all ranks"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("sending SIGKILL"), std::string::npos) << r.err;
  EXPECT_EQ(still_running(rank_pids_, 3000ms), std::vector<pid_t>{});
}

TEST_F(chorusrun_test, sigterm_stops_every_rank) {
  child_process job = start_chorusrun({"-np", "2", "-x", "DIR=" + scratch_dir_, "--", "sh", "-c",
                         sleeping_rank});
  bool started = job.read_until(
      [](const std::string& out, const std::string&) { return pids_after(out, "child").size() == 2; }, 10s);
  remember_pids(job.output());
  ASSERT_TRUE(started) << "ranks did not report their pids in time";
  auto sent = steady::now();
  ASSERT_EQ(::kill(job.pid(), SIGTERM), 0);
  auto r = finish(job);
  auto elapsed = steady::now() - sent;
  auto shells = pids_after(r.out, "pid");
  auto children = pids_after(r.out, "child");
  remember_pids(r.out);

  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
  EXPECT_LT(elapsed, 5s);
  EXPECT_NE(r.err.find("received SIGTERM"), std::string::npos) << r.err;
  ASSERT_EQ(shells.size(), 2u) << r.out;
  for (pid_t p : shells) {
    errno = 0;
    EXPECT_EQ(::kill(p, 0), -1) << "rank pid " << p << " still exists";
    EXPECT_EQ(errno, ESRCH);
  }
  EXPECT_EQ(still_running(children, 3000ms), std::vector<pid_t>{});
}

TEST_F(chorusrun_test, ranks_die_with_a_sigkilled_chorusrun) {
  child_process job = start_chorusrun({"-np", "2", "-x", "DIR=" + scratch_dir_, "--", "sh", "-c", sleeping_rank});
  bool started = job.read_until(
      [](const std::string& out, const std::string&) { return pids_after(out, "child").size() == 2; }, 10s);
  remember_pids(job.output());
  ASSERT_TRUE(started) << "ranks did not report their pids in time";
  auto shells = pids_after(job.output(), "pid");
  ASSERT_EQ(shells.size(), 2u);
  ASSERT_EQ(::kill(job.pid(), SIGKILL), 0);  // no chance to forward anything
  finish(job);
  // The ranks (the shells chorusrun started) get SIGKILL from the kernel when it dies.
  EXPECT_EQ(still_running(shells, 3000ms), std::vector<pid_t>{});
}

TEST_F(chorusrun_test, removes_the_jobs_leftover_segments_from_dev_shm_even_when_a_rank_fails) {
  // A rank leaves a segment named as the shared-memory lanes name theirs (the job id without
  // leading zeros) and fails; another job's segment beside it stays.
  const std::string other = "/dev/shm/chorus-feedfacefeedface-test-" + std::to_string(::getpid());
  { std::ofstream(other.c_str()) << "x"; }
  auto r = run_chorusrun({"-np", "1", "--", "sh", "-c",
                          "n=/dev/shm/chorus-$(echo $CHORUS_JOB_ID | sed 's/^0*//')-0-1-0-test; "
                          "echo x > $n && echo seg=$n; exit 3"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  auto at = r.out.find("seg=");
  ASSERT_NE(at, std::string::npos) << r.out << r.err;
  std::string seg = r.out.substr(at + 4, r.out.find('\n', at) - at - 4);
  struct stat st {};
  EXPECT_NE(::stat(seg.c_str(), &st), 0) << seg << " is still there";
  EXPECT_EQ(::stat(other.c_str(), &st), 0) << "another job's segment was removed";
  ::unlink(other.c_str());
}

// What each descriptor of `pid` is ("socket:[123]", a path).
std::vector<std::string> fd_targets(pid_t pid) {
  std::vector<std::string> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      char buf[256] = {};
      ssize_t n = ::readlink((dir + "/" + e->d_name).c_str(), buf, sizeof buf - 1);
      if (n > 0) out.emplace_back(buf, static_cast<size_t>(n));
    }
    ::closedir(d);
  }
  return out;
}

// The port chorusrun chose is bound and listening from before rank 0 starts until rank 0 ends:
// no other process can take it in between (rank 0 serves the store on it). Only rank 0 holds it,
// chorusrun keeps no copy, and it is free again when the job is over.
TEST_F(chorusrun_test, the_rendezvous_port_is_held_for_rank_0_alone) {
  const std::string script =
      "fd=${CHORUS_RENDEZVOUS_FD:-none}; what=none; "
      "[ \"$fd\" != none ] && what=$(readlink /proc/$$/fd/$fd); "
      "echo rank=$CHORUS_RANK rdv=$CHORUS_RENDEZVOUS fd=$fd what=$what pid=$$; i=0; "
      "while [ ! -e \"$DIR/go\" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done";
  child_process job = start_chorusrun({"-np", "2", "-x", "DIR=" + scratch_dir_, "--", "sh", "-c", script});
  bool started = job.read_until(
      [](const std::string& out, const std::string&) { return pids_after(out, "pid").size() == 2; }, 10s);
  remember_pids(job.output());
  ASSERT_TRUE(started) << job.output() << job.errors();
  const std::string out = job.output();
  std::smatch m0, m1;
  ASSERT_TRUE(std::regex_search(out, m0, std::regex(R"(rank=0 rdv=127\.0\.0\.1:([0-9]+) fd=([0-9]+) what=(socket:\[[0-9]+\]))")))
      << out;
  ASSERT_TRUE(std::regex_search(out, m1, std::regex(R"(rank=1 rdv=\S+ fd=none what=none)"))) << out;
  const auto port = static_cast<uint16_t>(std::stoi(m0[1]));
  EXPECT_EQ(bind_errno(port), EADDRINUSE) << "port " << port << " is free for anyone to take";
  auto launcher_fds = fd_targets(job.pid());
  EXPECT_EQ(std::count(launcher_fds.begin(), launcher_fds.end(), m0[3].str()), 0)
      << "chorusrun still holds the store's socket " << m0[3];
  { std::ofstream(scratch_dir_ + "/go") << "x"; }
  auto r = finish(job);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(bind_errno(port), 0) << "port " << port << " still taken after the job";
}

// A CHORUS_RENDEZVOUS_FD in chorusrun's own environment (left by an outer launcher) reaches no
// rank: it names a descriptor they do not have.
TEST_F(chorusrun_test, an_inherited_rendezvous_fd_variable_is_not_passed_on) {
  auto r = run_chorusrun({"-np", "2", "--", "sh", "-c", "echo fd=${CHORUS_RENDEZVOUS_FD:-none}"},
                         {{"CHORUS_RENDEZVOUS", "127.0.0.1:4711"}, {"CHORUS_RENDEZVOUS_FD", "9"}});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[0] fd=none", "[1] fd=none"}));
}

TEST_F(chorusrun_test, timeout_stops_the_job) {
  auto start = steady::now();
  auto r = run_chorusrun({"--timeout", "0.5", "-np", "2", "--", "sleep", "30"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_LT(steady::now() - start, 8s);
  EXPECT_NE(r.err.find("--timeout"), std::string::npos) << r.err;
}

TEST_F(chorusrun_test, extra_env_and_streams_reach_the_ranks) {
  auto r = run_chorusrun({"-np", "2", "-x", "FOO=bar", "-x", "EQ=a=b", "--streams", "3", "--",
                          "sh", "-c", "echo FOO=$FOO EQ=$EQ streams=$CHORUS_NUM_STREAMS"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[0] FOO=bar EQ=a=b streams=3",
                                                           "[1] FOO=bar EQ=a=b streams=3"}));
}

TEST_F(chorusrun_test, bad_usage_exits_2_with_usage) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--", "true"},
      {"-np", "0", "--", "true"},
      {"-np", "two", "--", "true"},
      {"-np", "2"},
      {"-np", "2", "--"},
      {"-np"},
      {"-np", "2", "--bogus", "--", "true"},
      {"-np", "2", "-x", "NOVALUE", "--", "true"},
      {"-np", "2", "-x", "CHORUS_RANK=5", "--", "true"},
      {"-np", "2", "--streams", "0", "--", "true"},
      {"-np", "2", "--timeout", "-1", "--", "true"},
  };
  for (const auto& args : bad) {
    auto r = run_chorusrun(args);
    std::string shown;
    for (const auto& a : args) shown += " " + a;
    ASSERT_FALSE(r.timed_out) << shown;
    EXPECT_EQ(r.exit_code, 2) << "args:" << shown << "\n" << r.err;
    EXPECT_NE(r.err.find("usage: chorusrun"), std::string::npos) << shown;
    EXPECT_EQ(r.out, "") << shown;
  }
}

TEST_F(chorusrun_test, help_prints_usage_and_exits_0) {
  auto r = run_chorusrun({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("usage: chorusrun"), std::string::npos);
}

TEST_F(chorusrun_test, partial_final_line_is_printed_with_prefix) {
  auto r = run_chorusrun(
      {"-np", "2", "--", "sh", "-c", "printf 'line\\nno newline'; printf 'err tail' >&2"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[0] line", "[0] no newline",
                                                           "[1] line", "[1] no newline"}));
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(sorted_lines(r.err), (std::vector<std::string>{"[0] err tail", "[1] err tail"}));
}

TEST_F(chorusrun_test, no_prefix_keeps_lines_whole) {
  auto r = run_chorusrun({"--no-prefix", "-np", "2", "--", "sh", "-c", "echo hello"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"hello", "hello"}));
}

TEST_F(chorusrun_test, missing_command_fails_with_status_127) {
  auto r = run_chorusrun({"-np", "1", "--", "chorusrun-test-no-such-command"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("[0] chorusrun: cannot execute 'chorusrun-test-no-such-command'"),
            std::string::npos)
      << r.err;
}

}  // namespace
