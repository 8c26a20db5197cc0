// Runs a shell command for the tests that drive scripts (the emulated hosts): its exit code
// (128 + signal when killed) and its stdout and stderr together.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace chorus::testing {

struct run_result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

inline run_result run(const std::string& command) {
  run_result r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace chorus::testing
