// chorusrun -H with a --launcher template, on this machine (no root, no ssh): the launcher is
// `env` so every "remote" rank goes through the stdin prologue. Checks the numbering by host,
// HOROVOD_* variables, and that the job secret is on no process's command line while it runs.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>

namespace {

const std::string secret = "5ec12e75ec12e75ec12e75ec12e75ec12e75ec12e75ec12e75ec12e75ec12e7a";

// Processes whose command line holds `needle`.
std::vector<std::string> cmdlines_with(const std::string& needle) {
  std::vector<std::string> hits;
  DIR* d = ::opendir("/proc");
  if (!d) return hits;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (text.find(needle) != std::string::npos) hits.push_back(std::string(e->d_name) + ": " + text);
  }
  ::closedir(d);
  return hits;
}

}  // namespace

TEST(chorusrun_hosts, launcher_ranks_get_host_numbering_and_the_secret_only_on_stdin) {
  ::setenv("CHORUS_JOB_SECRET", secret.c_str(), 1);  // chorusrun keeps it: a known value to look for
  std::string cmd = std::string("timeout -s KILL 60 ") + CHORUSRUN_PATH +
                    " -np 3 -H hostA:2,hostB:1 --launcher 'env CHORUS_TEST_VIA={host}' --timeout 30 -- "
                    "sh -c 'echo vars $CHORUS_RANK $CHORUS_LOCAL_RANK $CHORUS_LOCAL_SIZE $HOROVOD_CROSS_RANK "
                    "$HOROVOD_CROSS_SIZE $HOROVOD_HOSTNAME $CHORUS_TEST_VIA ${#CHORUS_JOB_SECRET}; sleep 2' 2>&1";
  std::string out;
  int status = -1;
  std::thread runner([&] {
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    status = ::pclose(p);
  });
  // While the ranks sleep: the secret is in environments and stdin pipes, on no command line.
  std::vector<std::string> leaks;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (auto& hit : cmdlines_with(secret)) leaks.push_back(hit);
  }
  runner.join();
  ::unsetenv("CHORUS_JOB_SECRET");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_TRUE(leaks.empty()) << leaks.front();
  const char* want[] = {"[0] vars 0 0 2 0 2 hostA hostA 64", "[1] vars 1 1 2 0 1 hostA hostA 64",
                        "[2] vars 2 0 1 1 2 hostB hostB 64"};
  for (const char* w : want) EXPECT_NE(out.find(w), std::string::npos) << w << "\n" << out;
}

TEST(chorusrun_hosts, ssh_command_runs_through_a_remote_shell_with_quoting_intact) {
  // A stand-in `ssh` first in PATH: skips its options, takes the host, runs the one remote
  // string with sh, as sshd hands it to the login shell. No real ssh is run.
  char dir[] = "/tmp/chorus-fake-ssh-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string ssh = std::string(dir) + "/ssh";
  {
    std::ofstream f(ssh);
    f << "#!/bin/sh\nwhile [ \"$1\" = -o ]; do shift 2; done\nshift\nexec sh -c \"$1\"\n";
  }
  ::chmod(ssh.c_str(), 0755);
  std::string cmd = std::string("PATH=") + dir + ":$PATH timeout -s KILL 60 " + CHORUSRUN_PATH +
                    " -np 2 -H localhost:1,far-node:1 --timeout 30 -- sh -c "
                    "'echo got $CHORUS_RANK $HOROVOD_HOSTNAME $HOROVOD_CROSS_RANK ${#CHORUS_JOB_SECRET} \"$0\"' "
                    "\"it's a \\$HOME test\" 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = ::pclose(p);
  ::unlink(ssh.c_str());
  ::rmdir(dir);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("[0] got 0 localhost 0 64 it's a $HOME test"), std::string::npos) << out;
  EXPECT_NE(out.find("[1] got 1 far-node 1 64 it's a $HOME test"), std::string::npos) << out;
}
