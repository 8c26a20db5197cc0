// The self-pipe that turns SIGINT, SIGTERM and SIGCHLD into a readable fd for the supervisor's
// poll(2) loop. Handlers only count the signal and write one byte; all work happens in the loop.
#pragma once

#include <signal.h>

#include "runtime/core/status.hpp"

namespace chorus::chorusrun {

/// Installs the handlers on open() and restores the previous dispositions on destruction.
/// One per process (the handlers are process-wide); use from one thread.
class signal_pipe {
 public:
  signal_pipe() = default;
  ~signal_pipe();
  signal_pipe(const signal_pipe&) = delete;
  signal_pipe& operator=(const signal_pipe&) = delete;

  /// Creates the pipe, installs handlers for SIGINT, SIGTERM and SIGCHLD, ignores SIGPIPE
  /// (a closed stdout becomes a write error instead of killing chorusrun).
  status open();

  /// Readable whenever a signal arrived since the last drain().
  int fd() const { return read_fd_; }

  /// Empties the pipe; call when fd() polls readable, then ask take() for each signal.
  void drain();

  /// How many times `signo` (SIGINT, SIGTERM or SIGCHLD) arrived since the last take(signo).
  int take(int signo);

  /// In a freshly forked child, before exec: the dispositions and signal mask chorusrun
  /// started with for every signal open() touched. Async-signal-safe.
  static void reset_in_child();

  /// Blocks the handled signals while alive. Hold one across fork(): a signal that reaches
  /// the child before reset_in_child() then stays pending until the child's own disposition
  /// applies, instead of being swallowed by chorusrun's handler in the child.
  class fork_guard {
   public:
    fork_guard();
    ~fork_guard();
    fork_guard(const fork_guard&) = delete;
    fork_guard& operator=(const fork_guard&) = delete;

   private:
    sigset_t previous_;
  };

 private:
  int read_fd_ = -1;
  bool installed_ = false;
};

}  // namespace chorus::chorusrun
