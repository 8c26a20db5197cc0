// Test helper: starts the ranks of a job as real processes on 127.0.0.1 (fresh rendezvous
// port and job secret), captures each rank's output, waits with a hard deadline and kills
// whatever is left by its own pid.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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
  using env_map = std::map<std::string, std::string>;

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
    for (int r = 0; r < (started < 0 ? size : started); ++r) start(r);
  }

  /// Starts the ranks the constructor left out.
  void start_rest() {
    for (int r = static_cast<int>(results_.size()); r < size_; ++r) start(r);
  }

  ~local_job() {
    for (auto& r : results_)
      if (r.pid > 0 && !reaped(r)) ::kill(r.pid, SIGKILL), ::waitpid(r.pid, nullptr, 0);
    std::string cmd = "rm -rf '" + dir_ + "'";
    int rc = std::system(cmd.c_str());
    (void)rc;
  }

  const env_map& env() const { return env_; }
  pid_t pid(int rank) const { return results_[rank].pid; }
  std::string output(int rank) const {
    std::ifstream in(dir_ + "/rank-" + std::to_string(rank) + ".log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void kill(int rank, int sig) { ::kill(results_[rank].pid, sig); }

  /// Waits until `rank`'s output contains `text` (true) or the timeout passes (false).
  bool wait_for_output(int rank, const std::string& text, std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (output(rank).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  /// Waits for every rank but `except` up to `timeout`, then kills the rest (SIGKILL, `except`
  /// too) and marks those timed out (`except` is only killed, e.g. a rank a test froze).
  std::vector<rank_result> wait(std::chrono::milliseconds timeout, int except = -1) {
    auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool all = true;
      for (auto& r : results_) all &= reaped(r) || r.rank == except;
      if (all || std::chrono::steady_clock::now() >= end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (auto& r : results_) {
      if (!reaped(r)) {
        r.timed_out = r.rank != except;
        ::kill(r.pid, SIGKILL);
        int st = 0;
        ::waitpid(r.pid, &st, 0);
        record(r, st);
      }
      r.output = output(r.rank);
    }
    return results_;
  }

 private:
  void start(int rank) {
    rank_result r;
    r.rank = rank;
    std::string log = dir_ + "/rank-" + std::to_string(rank) + ".log";
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      for (auto& [k, v] : env_) ::setenv(k.c_str(), v.c_str(), 1);
      ::setenv("CHORUS_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("CHORUS_LOCAL_RANK", std::to_string(rank).c_str(), 1);
      std::vector<char*> args;
      for (auto& a : argv_) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::perror("execv");
      ::_exit(127);
    }
    r.pid = pid;
    results_.push_back(r);
  }

  bool reaped(rank_result& r) {
    if (r.exited || r.signal) return true;
    int st = 0;
    if (::waitpid(r.pid, &st, WNOHANG) == r.pid) {
      record(r, st);
      return true;
    }
    return false;
  }

  static void record(rank_result& r, int st) {
    if (WIFEXITED(st)) {
      r.exited = true;
      r.exit_code = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
      r.signal = WTERMSIG(st);
    }
  }

  int size_;
  std::vector<std::string> argv_;
  env_map env_;
  std::string dir_;
  std::vector<rank_result> results_;
};

}  // namespace chorus::testing
