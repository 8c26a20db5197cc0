// Test helper: one child process of a test (fork and exec, the test's environment less some
// names plus overrides, stdout and stderr to files), polled, read while it runs, or waited for
// with a hard deadline (scaled by tests/support/test_time.hpp) and killed by its own pid
// (SIGKILL) at that deadline or when the object goes. run_bounded() runs a program to its end
// that way; local_job.hpp starts a job's ranks with it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/test_time.hpp"

extern char** environ;

namespace chorus::testing {

/// The whole file at `path` ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// How a child ended, as far as it has.
struct exit_status {
  bool exited = false;     ///< exited normally, with exit_code
  int exit_code = -1;
  int signal = 0;          ///< killed by this signal
  bool timed_out = false;  ///< still running at its deadline, then killed
  bool ended() const { return exited || signal != 0; }
};

class child_process {
 public:
  using env_map = std::map<std::string, std::string>;
  using clock = std::chrono::steady_clock;

  /// Starts argv[0] (a path) with `argv`; its environment is the test's without the names in
  /// `unset`, with `env` set over it. stdout goes to `out_path`, stderr to `err_path` ("": the
  /// same file). `dir`: its working folder ("": the test's). A failed exec exits 127 after
  /// saying why in that file.
  child_process(const std::vector<std::string>& argv, const env_map& env, const std::string& out_path,
                const std::string& err_path = "", const std::string& dir = "",
                const std::vector<std::string>& unset = {})
      : out_path_(out_path), err_path_(err_path) {
    // Everything the child needs is made before fork: between fork and exec it only duplicates
    // descriptors and changes folder (the test may have threads holding the allocator's lock).
    // The files are emptied here, so output() never shows what a previous child left in them.
    std::vector<std::string> envs = environment(env, unset);
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = err_path.empty() ? out : ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out, 1);  // the copies lose close-on-exec; the originals close at exec
      ::dup2(err, 2);
      if (!dir.empty() && ::chdir(dir.c_str()) != 0) std::perror("chdir");
      ::execve(args[0], args.data(), envp.data());
      std::perror("execve");
      ::_exit(127);
    }
    ::close(out);
    if (err != out) ::close(err);
  }

  child_process(child_process&& o) noexcept
      : out_path_(std::move(o.out_path_)), err_path_(std::move(o.err_path_)), pid_(std::exchange(o.pid_, -1)),
        status_(o.status_) {}
  child_process& operator=(child_process&&) = delete;
  child_process(const child_process&) = delete;
  ~child_process() { kill_now(false); }

  pid_t pid() const { return pid_; }
  const exit_status& status() const { return status_; }
  void signal(int sig) {
    if (pid_ > 0 && !status_.ended()) ::kill(pid_, sig);
  }

  /// Whether it has ended (reaps it if it just did).
  bool poll() {
    if (status_.ended() || pid_ <= 0) return true;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) != pid_) return false;
    record(st);
    return true;
  }

  /// Waits until it ends or `end` passes; whether it ended. Kills nothing.
  bool wait_until(clock::time_point end) {
    while (!poll()) {
      if (clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  /// Waits up to `limit` (scaled) for it to end, then kills it as timed out; how it ended.
  const exit_status& finish(std::chrono::milliseconds limit) {
    if (!wait_until(deadline_in(limit))) kill_now(true);
    return status_;
  }

  /// Its stdout so far (with stderr when they share a file).
  std::string output() const { return read_file(out_path_); }
  /// Its stderr so far ("" when it shares stdout's file).
  std::string errors() const { return err_path_.empty() ? std::string() : read_file(err_path_); }

  /// Reads its output until `done(stdout, stderr)` holds (true), or it has ended or `limit`
  /// (scaled) has passed without that (false). Kills nothing.
  bool read_until(const std::function<bool(const std::string& out, const std::string& err)>& done,
                  std::chrono::milliseconds limit) {
    const clock::time_point end = deadline_in(limit);
    for (;;) {
      const bool ended = poll();  // before reading: what an ended child wrote is all there
      if (done(output(), errors())) return true;
      if (ended || clock::now() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  /// SIGKILL and reap unless it has ended; `timed_out` marks it as killed at its deadline.
  const exit_status& kill_now(bool timed_out) {
    if (pid_ > 0 && !poll()) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      record(st);
      status_.timed_out = timed_out;
    }
    return status_;
  }

 private:
  void record(int st) {
    if (WIFEXITED(st)) {
      status_.exited = true;
      status_.exit_code = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
      status_.signal = WTERMSIG(st);
    }
  }

  // The test's environment without the names in `unset` or `env`, then `env`'s entries.
  static std::vector<std::string> environment(const env_map& env, const std::vector<std::string>& unset) {
    std::vector<std::string> out;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      if (env.count(name) == 0 && std::find(unset.begin(), unset.end(), name) == unset.end()) out.push_back(entry);
    }
    for (auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
  }

  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  exit_status status_;
};

struct bounded_run {
  exit_status status;
  std::string out;  ///< stdout (and stderr, unless asked apart)
  std::string err;  ///< stderr when asked apart
};

/// Runs `argv` to its end, killed after `limit` (scaled); its output goes through files in
/// `scratch` (tool.out, tool.err). `apart`: stderr kept apart from stdout.
inline bounded_run run_bounded(const std::vector<std::string>& argv, const std::string& scratch,
                               std::chrono::milliseconds limit, bool apart = false, const child_process::env_map& env = {}) {
  child_process p(argv, env, scratch + "/tool.out", apart ? scratch + "/tool.err" : "");
  bounded_run r;
  r.status = p.finish(limit);
  r.out = p.output();
  r.err = p.errors();
  return r;
}

}  // namespace chorus::testing
