// Self-pipe signal delivery for chorusrun's supervisor.
#include "bindings/cli/chorusrun/signal_pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace chorus::chorusrun {
namespace {

constexpr int handled_signals[] = {SIGINT, SIGTERM, SIGCHLD};

// Handler state is process-wide: lock-free atomics and a plain fd are safe to touch from a
// signal handler.
std::atomic<int> g_counts[3];
int g_write_fd = -1;
struct sigaction g_previous[3];
struct sigaction g_previous_pipe;
sigset_t g_original_mask;

sigset_t handled_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int signo : handled_signals) sigaddset(&set, signo);
  return set;
}

int slot_of(int signo) {
  for (int i = 0; i < 3; ++i) {
    if (handled_signals[i] == signo) return i;
  }
  return -1;
}

extern "C" void on_signal(int signo) {
  int saved_errno = errno;
  int slot = slot_of(signo);
  if (slot >= 0) g_counts[slot].fetch_add(1);
  // A full pipe already wakes the loop; the counts carry which signals came.
  ssize_t rc = ::write(g_write_fd, "s", 1);
  (void)rc;
  errno = saved_errno;
}

}  // namespace

status signal_pipe::open() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return {errc::internal, std::string("pipe2 for signal delivery: ") + std::strerror(errno)};
  }
  read_fd_ = fds[0];
  g_write_fd = fds[1];
  ::sigprocmask(SIG_SETMASK, nullptr, &g_original_mask);

  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int i = 0; i < 3; ++i) {
    if (::sigaction(handled_signals[i], &sa, &g_previous[i]) != 0) {
      return {errc::internal, std::string("sigaction: ") + std::strerror(errno)};
    }
  }
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &g_previous_pipe);
  installed_ = true;
  return {};
}

signal_pipe::~signal_pipe() {
  if (installed_) {
    for (int i = 0; i < 3; ++i) ::sigaction(handled_signals[i], &g_previous[i], nullptr);
    ::sigaction(SIGPIPE, &g_previous_pipe, nullptr);
  }
  if (read_fd_ >= 0) ::close(read_fd_);
  if (g_write_fd >= 0) ::close(g_write_fd);
  g_write_fd = -1;
}

void signal_pipe::drain() {
  char buf[256];
  while (::read(read_fd_, buf, sizeof buf) > 0) {
  }
}

int signal_pipe::take(int signo) {
  int slot = slot_of(signo);
  return slot < 0 ? 0 : g_counts[slot].exchange(0);
}

void signal_pipe::reset_in_child() {
  // The rank gets the dispositions chorusrun itself started with, as if it had been run
  // directly; in particular SIGPIPE is no longer ignored (an ignored disposition survives exec).
  for (int i = 0; i < 3; ++i) ::sigaction(handled_signals[i], &g_previous[i], nullptr);
  ::sigaction(SIGPIPE, &g_previous_pipe, nullptr);
  ::sigprocmask(SIG_SETMASK, &g_original_mask, nullptr);
}

signal_pipe::fork_guard::fork_guard() {
  sigset_t set = handled_set();
  ::sigprocmask(SIG_BLOCK, &set, &previous_);
}

signal_pipe::fork_guard::~fork_guard() { ::sigprocmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace chorus::chorusrun
