// fork+exec of one rank. Everything the child needs is prepared before fork(), so the child
// calls only async-signal-safe functions between fork() and exec().
#include "bindings/cli/chorusrun/rank_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bindings/cli/chorusrun/signal_pipe.hpp"
#include "runtime/core/log.hpp"

extern char** environ;

namespace chorus::chorusrun {
namespace {

std::vector<char*> to_c_array(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Child side after fork(): only async-signal-safe calls, never returns.
[[noreturn]] void exec_child(char** argv, char** envp, int stdin_fd, int stdout_fd,
                             int stderr_fd, int inherit_fd, const char* exec_failed_msg,
                             size_t exec_failed_len, pid_t launcher) {
  ::setpgid(0, 0);
  // A rank dies with chorusrun, even a SIGKILLed one, instead of living on as an orphan; a
  // launcher that died before this line is seen as a new parent.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher) _exit(127);
  signal_pipe::reset_in_child();
  // dup2 clears close-on-exec on the copies; the originals close at exec.
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(stderr_fd, 2) < 0) _exit(127);
  if (inherit_fd >= 0 && ::fcntl(inherit_fd, F_SETFD, 0) != 0) _exit(127);
  environ = envp;
  ::execvp(argv[0], argv);
  int err = errno;
  ssize_t rc = ::write(2, exec_failed_msg, exec_failed_len);
  const char* why = std::strerror(err);
  rc = ::write(2, why, std::strlen(why));
  rc = ::write(2, "\n", 1);
  (void)rc;
  _exit(127);
}

}  // namespace

result<rank_process> spawn_rank(int rank, const std::vector<std::string>& command,
                                const std::vector<std::string>& env, const std::string& stdin_data,
                                int inherit_fd) {
  auto fail = [rank](const char* what) {
    return status{errc::internal, "rank " + std::to_string(rank) + ": " + what + ": " +
                                      std::strerror(errno)};
  };
  std::vector<char*> argv = to_c_array(command);
  std::vector<char*> envp = to_c_array(env);
  std::string exec_failed = "chorusrun: cannot execute '" + command.front() + "': ";

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  int dev_null = -1;
  auto close_all = [&] {
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1], &dev_null}) {
      close_fd(*fd);
    }
  };
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    status st = fail("creating output pipes");
    close_all();
    return st;
  }
  if (stdin_data.empty()) {
    dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (dev_null < 0) {
      status st = fail("opening /dev/null");
      close_all();
      return st;
    }
  } else if (stdin_data.size() > 60000) {
    close_all();
    return status{errc::invalid_argument, "rank " + std::to_string(rank) + ": " +
                                              std::to_string(stdin_data.size()) +
                                              " bytes of variables for stdin exceed a pipe's 64 KiB"};
  } else {
    // The data fits the pipe (a few KiB of NAME=VALUE lines): write it all, then close, so the
    // rank reads it and then EOF. `dev_null` holds the read end.
    int in_pipe[2] = {-1, -1};
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
      status st = fail("creating the stdin pipe");
      close_all();
      return st;
    }
    dev_null = in_pipe[0];
    size_t off = 0;
    while (off < stdin_data.size()) {
      ssize_t n = ::write(in_pipe[1], stdin_data.data() + off, stdin_data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        status st = fail("writing the rank's variables to its stdin");
        ::close(in_pipe[1]);
        close_all();
        return st;
      }
      off += static_cast<size_t>(n);
    }
    ::close(in_pipe[1]);
  }

  pid_t pid = -1;
  int fork_errno = 0;
  const pid_t launcher = ::getpid();
  {
    signal_pipe::fork_guard blocked;
    pid = ::fork();
    fork_errno = errno;
    if (pid == 0) {
      exec_child(argv.data(), envp.data(), dev_null, out_pipe[1], err_pipe[1], inherit_fd,
                 exec_failed.data(), exec_failed.size(), launcher);
    }
  }
  if (pid < 0) {
    errno = fork_errno;
    status st = fail("fork");
    close_all();
    return st;
  }

  // Both sides call setpgid so the group exists before either one signals it. The parent's
  // call fails harmlessly (EACCES) once the child has exec'd.
  ::setpgid(pid, pid);
  close_fd(out_pipe[1]);
  close_fd(err_pipe[1]);
  close_fd(dev_null);
  for (int fd : {out_pipe[0], err_pipe[0]}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  CHORUS_LOG(debug, "chorusrun", "spawned rank=" << rank << " pid=" << pid
                                                 << " command=" << command.front());
  rank_process p;
  p.rank = rank;
  p.pid = pid;
  p.stdout_fd = out_pipe[0];
  p.stderr_fd = err_pipe[0];
  return p;
}

void signal_rank(const rank_process& p, int signo) {
  if (p.pid <= 0) return;
  // ESRCH (group empty, process gone) is the expected outcome late in a job.
  ::kill(-p.pid, signo);
  if (!p.reaped) ::kill(p.pid, signo);
}

}  // namespace chorus::chorusrun
