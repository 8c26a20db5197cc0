// Test helper: starts the ranks of a job as real processes on 127.0.0.1 (fresh rendezvous
// port and job secret), each a child_process (tests/support/child_process.hpp) with its output
// in a file, waits with a hard deadline (scaled by test_time.hpp) and kills whatever is left by
// its own pid.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.hpp"

namespace chorus::testing {

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

inline std::string random_hex(int bytes) {
  std::random_device rd;
  std::ostringstream os;
  for (int i = 0; i < bytes; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned>(rd() & 0xff));
    os << b;
  }
  return os.str();
}

struct rank_result {
  int rank = -1;
  pid_t pid = -1;
  bool exited = false;    ///< exited normally (else killed or still running at the deadline)
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string output;     ///< stdout and stderr
};

class local_job {
 public:
  using env_map = child_process::env_map;

  /// Starts the first `started` ranks (all when negative) of a job of `size` ranks of `argv`;
  /// `extra` adds variables. start_rest() starts the others.
  local_job(int size, std::vector<std::string> argv, env_map extra = {}, int started = -1)
      : size_(size), argv_(std::move(argv)) {
    env_["CHORUS_SIZE"] = std::to_string(size);
    env_["CHORUS_LOCAL_SIZE"] = std::to_string(size);
    env_["CHORUS_RENDEZVOUS"] = "127.0.0.1:" + std::to_string(free_port());
    env_["CHORUS_JOB_SECRET"] = random_hex(32);
    env_["CHORUS_JOB_ID"] = random_hex(8);
    env_["CHORUS_RENDEZVOUS_TIMEOUT_SECONDS"] = "20";
    env_["CHORUS_CONNECT_TIMEOUT_SECONDS"] = "20";
    for (auto& [k, v] : extra) env_[k] = v;
    char tmpl[] = "/tmp/chorus-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ranks_.reserve(static_cast<std::size_t>(size));
    for (int r = 0; r < (started < 0 ? size : started); ++r) start(r);
  }

  /// Rank `rank`, not started yet, gets `key=value` on top of the job's environment.
  void set_rank_env(int rank, const std::string& key, const std::string& value) { rank_env_[rank][key] = value; }

  /// Starts the ranks the constructor left out.
  void start_rest() {
    for (int r = static_cast<int>(ranks_.size()); r < size_; ++r) start(r);
  }

  ~local_job() {
    ranks_.clear();  // kills whatever is left, by pid
    std::string cmd = "rm -rf '" + dir_ + "'";
    int rc = std::system(cmd.c_str());
    (void)rc;
  }

  const env_map& env() const { return env_; }
  pid_t pid(int rank) const { return ranks_[rank].pid(); }
  std::string output(int rank) const { return read_file(log(rank)); }
  void kill(int rank, int sig) { ranks_[rank].signal(sig); }

  /// Waits until `rank`'s output contains `text` (true), or it ends or the timeout (scaled)
  /// passes without it (false).
  bool wait_for_output(int rank, const std::string& text, std::chrono::milliseconds timeout) {
    return ranks_[rank].read_until(
        [&](const std::string& out, const std::string&) { return out.find(text) != std::string::npos; }, timeout);
  }

  /// Waits for every rank but `except` up to `timeout` (scaled), then kills the rest (SIGKILL,
  /// `except` too) and marks those timed out (`except` is only killed, e.g. a rank a test froze).
  std::vector<rank_result> wait(std::chrono::milliseconds timeout, int except = -1) {
    const auto end = deadline_in(timeout);
    for (;;) {
      bool all = true;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) all &= ranks_[r].poll() || r == except;
      if (all || std::chrono::steady_clock::now() >= end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::vector<rank_result> results;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      const exit_status& st = ranks_[r].kill_now(r != except);
      results.push_back({r, ranks_[r].pid(), st.exited, st.exit_code, st.signal, st.timed_out, output(r)});
    }
    return results;
  }

 private:
  std::string log(int rank) const { return dir_ + "/rank-" + std::to_string(rank) + ".log"; }

  void start(int rank) {
    env_map env = env_;
    env["CHORUS_RANK"] = std::to_string(rank);
    env["CHORUS_LOCAL_RANK"] = std::to_string(rank);
    for (auto& [k, v] : rank_env_[rank]) env[k] = v;
    ranks_.emplace_back(argv_, env, log(rank));
  }

  int size_;
  std::vector<std::string> argv_;
  env_map env_;
  std::map<int, env_map> rank_env_;
  std::string dir_;
  std::vector<child_process> ranks_;
};

/// `job`'s environment for a process that knows the rendezvous but not the job secret: a fresh
/// secret, and the real one as CHORUS_TEST_STORE_SECRET (for the reads a port scan stands for).
inline local_job::env_map intruder_env(const local_job::env_map& job) {
  local_job::env_map env = job;
  env["CHORUS_TEST_STORE_SECRET"] = env["CHORUS_JOB_SECRET"];
  env["CHORUS_JOB_SECRET"] = random_hex(32);
  return env;
}

}  // namespace chorus::testing
