// The supervision loop of chorusrun. One job, in steps:
//  1. Install the signal self-pipe, start ranks 0..N-1 (a failed start stops those started).
//  2. poll(2) the self-pipe and every rank's stdout/stderr pipe; relay whole prefixed lines.
//  3. On SIGCHLD reap; the first rank that fails stops the others: SIGTERM to every rank's
//     process group, SIGKILL when they outlive the grace period.
//  4. On SIGINT/SIGTERM forward that signal the same way; a second one sends SIGKILL at once.
//  5. When --timeout expires, stop the job as in step 3.
//  6. Once every rank is reaped: kill what is left in the ranks' groups, drain the pipes, flush.
// Elastic mode replaces step 3: a failing rank leaves the job and the coordinator forms a new
// round of the ranks left (elastic_coordinator.hpp), also when a rank asks for one; below
// --min-np every rank is told to stop, and SIGTERM follows after a grace period.
#include "bindings/cli/chorusrun/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/elastic_coordinator.hpp"
#include "bindings/cli/chorusrun/host_discovery.hpp"
#include "bindings/cli/chorusrun/line_prefixer.hpp"
#include "bindings/cli/chorusrun/rank_process.hpp"
#include "bindings/cli/chorusrun/signal_pipe.hpp"
#include "runtime/core/log.hpp"

namespace chorus::chorusrun {
namespace {

using steady = std::chrono::steady_clock;

enum class stop_reason { none, launcher_failed, rank_failed, interrupted, timed_out };

// Reads per stream in the final drain: bounds the work if something outside the ranks' process
// groups (a daemonised grandchild) keeps writing into a pipe after the job ended.
constexpr int max_final_reads = 256;

// Writes all of `buf` to `fd` and clears it. A closed or broken stdout/stderr loses the output
// but does not stop the job (SIGPIPE is ignored while the supervisor runs).
void write_all(int fd, std::string& buf) {
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t n = ::write(fd, buf.data() + off, buf.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else {
      break;
    }
  }
  buf.clear();
}

std::string describe_exit(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
}

bool exited_cleanly(int wait_status) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

const char* signal_name(int signo) { return signo == SIGINT ? "SIGINT" : "SIGTERM"; }

// One rank and the prefixers of its two output streams.
struct rank_slot {
  rank_process proc;
  line_prefixer out;
  line_prefixer err;
};

class job_supervisor {
 public:
  job_supervisor(const launch_options& opts, const job_identity& job, const std::vector<rank_launch>& launches,
                 const supervisor_config& config)
      : opts_(opts), job_(job), launches_(launches), config_(config) {}

  int run() {
    if (status st = signals_.open(); !st) {
      say("cannot install signal handlers: " + st.message());
      return 1;
    }
    if (opts_.timeout_seconds) {
      job_deadline_ = steady::now() + std::chrono::duration_cast<steady::duration>(
                                          std::chrono::duration<double>(*opts_.timeout_seconds));
    }
    start_ranks();
    CHORUS_LOG(info, "chorusrun", "job started ranks=" << slots_.size() << " rendezvous="
                                                        << job_.rendezvous
                                                        << " job_id=" << job_.job_id);
    while (live_ > 0) poll_once();
    finish();
    CHORUS_LOG(debug, "chorusrun", "job ended exit_status=" << exit_status_);
    return exit_status_;
  }

 private:
  // Step 1. A rank that cannot be started (no fds, fork failed) fails the job; ranks already
  // started are stopped and reaped by the loop.
  void start_ranks() {
    slots_.reserve(launches_.size());
    for (const auto& l : launches_) {
      const int r = l.rank;
      auto proc = spawn_rank(r, l.argv, l.env, l.stdin_data, l.inherit_fd);
      // The rank has its own copy now (or never will): a listener kept open here would keep
      // the port after the rank is gone.
      if (l.inherit_fd >= 0) ::close(l.inherit_fd);
      if (!proc) {
        say("cannot start rank " + std::to_string(r) + ": " + proc.error().message() +
            "; stopping the job");
        set_reason(stop_reason::launcher_failed, 1);
        stop_all(SIGTERM);
        return;
      }
      std::string prefix = opts_.prefix_output ? "[" + std::to_string(r) + "] " : "";
      slots_.push_back(rank_slot{*proc, line_prefixer(prefix), line_prefixer(prefix)});
      ++live_;
    }
  }

  // Step 2: one wait for signals, output or a deadline, then everything that became ready.
  void poll_once() {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;  // fds[i + 1] -> (slot, is stderr)
    fds.push_back({signals_.fd(), POLLIN, 0});
    for (size_t i = 0; i < slots_.size(); ++i) {
      for (bool is_err : {false, true}) {
        int fd = is_err ? slots_[i].proc.stderr_fd : slots_[i].proc.stdout_fd;
        if (fd < 0) continue;
        fds.push_back({fd, POLLIN, 0});
        owners.emplace_back(i, is_err);
      }
    }
    int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0 && errno != EINTR) {
      abandon(std::string("poll failed: ") + std::strerror(errno));
      return;
    }
    if (ready > 0) {
      for (size_t k = 1; k < fds.size(); ++k) {
        if (fds[k].revents != 0) read_stream(slots_[owners[k - 1].first], owners[k - 1].second);
      }
      flush_output();
    }
    if (ready > 0 && fds[0].revents != 0) signals_.drain();
    handle_signals();
    if (config_.elastic && reason_ == stop_reason::none && config_.elastic->wants_new_round(config_.elastic_settle))
      reform("a rank asked for a new round");
    if (config_.elastic && opts_.discovery_script && reason_ == stop_reason::none && !finishing_ &&
        steady::now() >= next_discovery_)
      discover();
    check_deadlines();
  }

  // Steps 3 and 4. SIGCHLD is not trusted to be one per child: every live rank is polled.
  void handle_signals() {
    for (int signo : {SIGINT, SIGTERM}) {
      for (int n = signals_.take(signo); n > 0; --n) on_interrupt(signo);
    }
    if (signals_.take(SIGCHLD) == 0) return;
    for (auto& slot : slots_) {
      if (slot.proc.reaped) continue;
      int st = 0;
      pid_t got = ::waitpid(slot.proc.pid, &st, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) continue;
      slot.proc.reaped = true;
      slot.proc.wait_status = got < 0 ? 0 : st;  // ECHILD: reaped elsewhere, nothing to report
      --live_;
      on_rank_exit(slot);
    }
  }

  void on_rank_exit(rank_slot& slot) {
    int st = slot.proc.wait_status;
    CHORUS_LOG(debug, "chorusrun", "rank exited rank=" << slot.proc.rank << " pid="
                                                        << slot.proc.pid
                                                        << " how=\"" << describe_exit(st) << "\"");
    // Elastic: a worker that finished means the job is finishing; no worker is added after it.
    if (exited_cleanly(st)) finishing_ = true;
    if (exited_cleanly(st) || reason_ != stop_reason::none) return;
    // Print the rank's last words before the verdict.
    drain_stream(slot, false, max_final_reads);
    drain_stream(slot, true, max_final_reads);
    flush_output();
    if (config_.elastic) {
      reform("rank " + std::to_string(slot.proc.rank) + " " + describe_exit(st));
      return;
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    set_reason(stop_reason::rank_failed, code >= 1 && code <= 255 ? code : 1);
    say("rank " + std::to_string(slot.proc.rank) + where(slot.proc.rank) + " " + describe_exit(st) +
        "; stopping the job");
    stop_all(SIGTERM);
  }

  void on_interrupt(int signo) {
    if (reason_ == stop_reason::none) {
      set_reason(stop_reason::interrupted, 128 + signo);
      say(std::string("received ") + signal_name(signo) + "; forwarding it to all ranks");
      stop_all(signo);
    } else {
      say(std::string("received ") + signal_name(signo) + " while stopping; killing all ranks");
      stop_all(SIGKILL);
    }
  }

  // Elastic mode: a new round of the ranks still running, or the end of the job below --min-np.
  // Ranks are named by their worker id (their rank in round 0) throughout.
  void reform(const std::string& cause) {
    std::vector<int> members;
    for (const auto& slot : slots_)
      if (!slot.proc.reaped) members.push_back(slot.proc.rank);
    const int min_np = opts_.min_np.value_or(opts_.num_ranks);
    if (static_cast<int>(members.size()) < min_np) {
      std::string why = "chorusrun: " + cause + "; " + std::to_string(members.size()) +
                        " rank(s) left, fewer than --min-np " + std::to_string(min_np) + ": ending the job";
      say(why.substr(11));
      set_reason(stop_reason::rank_failed, 1);
      if (auto st = config_.elastic->end_job(members, why); !st) {
        say("cannot tell the ranks to stop: " + st.message() + "; stopping them");
        stop_all(SIGTERM);
        return;
      }
      end_deadline_ = steady::now() + config_.elastic_end_grace;
      return;
    }
    if (auto st = config_.elastic->form_round(members); !st) {
      say("cannot form a new round: " + st.message() + "; stopping the job");
      set_reason(stop_reason::launcher_failed, 1);
      stop_all(SIGTERM);
      return;
    }
    say(cause + "; elastic round " + std::to_string(config_.elastic->round()) + " goes on with " +
        std::to_string(members.size()) + " rank(s)");
  }

  // Elastic mode with --host-discovery-script: start workers for slots this host gained, up to
  // --max-np, and form a round with them (the others join it at their next commit). Fewer slots
  // than workers is reported, not acted on (no worker is stopped for it yet).
  void discover() {
    next_discovery_ = steady::now() + config_.discovery_interval;
    int live = 0;
    for (const auto& slot : slots_) live += slot.proc.reaped ? 0 : 1;
    const int wanted = workers_wanted(*opts_.discovery_script, config_.host_name, config_.discovery_bound,
                                      opts_.max_np.value_or(opts_.num_ranks), live,
                                      [this](const std::string& m) { say_once(m); });
    int added = 0;
    for (; live + added < wanted; ++added) {
      const int id = next_worker_id_++;
      rank_launch l = new_worker_launch(launches_.front(), id);
      auto proc = spawn_rank(id, l.argv, l.env, l.stdin_data, -1);
      if (!proc) {
        say("cannot start worker " + std::to_string(id) + ": " + proc.error().message());
        break;
      }
      std::string prefix = opts_.prefix_output ? "[" + std::to_string(id) + "] " : "";
      slots_.push_back(rank_slot{*proc, line_prefixer(prefix), line_prefixer(prefix)});
      ++live_;
    }
    if (added > 0) reform("host discovery added " + std::to_string(added) + " worker(s)");
  }

  void say_once(const std::string& message) {
    if (said_.insert(message).second) say(message);
  }

  // Without a working poll(2) the job cannot be supervised: kill it and wait for the ranks.
  void abandon(const std::string& why) {
    say(why + "; killing the job");
    set_reason(stop_reason::launcher_failed, 1);
    stop_all(SIGKILL);
    for (auto& slot : slots_) {
      if (slot.proc.reaped) continue;
      int st = 0;
      while (::waitpid(slot.proc.pid, &st, 0) < 0 && errno == EINTR) {
      }
      slot.proc.reaped = true;
      slot.proc.wait_status = st;
      --live_;
    }
  }

  // Step 5, and the SIGKILL that ends the grace period of steps 3 and 4.
  void check_deadlines() {
    auto now = steady::now();
    if (job_deadline_ && now >= *job_deadline_) {
      job_deadline_.reset();
      if (reason_ == stop_reason::none) {
        set_reason(stop_reason::timed_out, 124);
        std::ostringstream msg;
        msg << "job still running after --timeout " << *opts_.timeout_seconds
            << " s; stopping the job";
        say(msg.str());
        stop_all(SIGTERM);
      }
    }
    if (end_deadline_ && now >= *end_deadline_) {
      end_deadline_.reset();
      say("rank(s) told to stop are still running; stopping them");
      stop_all(SIGTERM);
    }
    if (kill_deadline_ && now >= *kill_deadline_) {
      std::string names;
      for (const auto& slot : slots_) {
        if (!slot.proc.reaped) names += " " + std::to_string(slot.proc.rank);
      }
      std::ostringstream msg;
      msg << "rank(s)" << names << " still running " << config_.kill_grace.count() / 1000.0
          << " s after being asked to stop; sending SIGKILL";
      say(msg.str());
      stop_all(SIGKILL);
    }
  }

  int poll_timeout_ms() const {
    std::optional<steady::time_point> next;
    std::optional<steady::time_point> discovery;
    if (config_.elastic && opts_.discovery_script && reason_ == stop_reason::none && !finishing_)
      discovery = next_discovery_;
    for (const auto& d : {job_deadline_, kill_deadline_, end_deadline_, discovery}) {
      if (d && (!next || *d < *next)) next = d;
    }
    // Elastic mode also looks for requests of a new round in the store.
    if (config_.elastic && reason_ == stop_reason::none) {
      auto soon = steady::now() + std::chrono::milliseconds(100);
      if (!next || soon < *next) next = soon;
    }
    if (!next) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - steady::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
  }

  // Signals every rank; anything but SIGKILL starts the grace period before SIGKILL follows.
  void stop_all(int signo) {
    for (const auto& slot : slots_) signal_rank(slot.proc, signo);
    if (signo == SIGKILL) {
      kill_deadline_.reset();
    } else if (!kill_deadline_) {
      kill_deadline_ = steady::now() + config_.kill_grace;
    }
  }

  // Step 6.
  void finish() {
    for (const auto& slot : slots_) signal_rank(slot.proc, SIGKILL);  // groups only: all reaped
    for (auto& slot : slots_) {
      drain_stream(slot, false, max_final_reads);
      drain_stream(slot, true, max_final_reads);
      close_stream(slot, false);
      close_stream(slot, true);
    }
    flush_output();
  }

  // Reads once from a readable pipe. Returns true when bytes came (more may follow).
  bool read_stream(rank_slot& slot, bool is_err) {
    int fd = is_err ? slot.proc.stderr_fd : slot.proc.stdout_fd;
    if (fd < 0) return false;
    char buf[64 * 1024];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      (is_err ? slot.err : slot.out).feed({buf, static_cast<size_t>(n)}, is_err ? err_buf_ : out_buf_);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    close_stream(slot, is_err);  // EOF, or an error that makes the pipe useless
    return false;
  }

  void drain_stream(rank_slot& slot, bool is_err, int max_reads) {
    for (int i = 0; i < max_reads && read_stream(slot, is_err); ++i) {
    }
  }

  void close_stream(rank_slot& slot, bool is_err) {
    int& fd = is_err ? slot.proc.stderr_fd : slot.proc.stdout_fd;
    if (fd < 0) return;
    ::close(fd);
    fd = -1;
    (is_err ? slot.err : slot.out).finish(is_err ? err_buf_ : out_buf_);
  }

  void flush_output() {
    write_all(1, out_buf_);
    write_all(2, err_buf_);
  }

  // A line from chorusrun itself, after any rank output already read.
  void say(const std::string& message) {
    flush_output();
    std::string line = "chorusrun: " + message + "\n";
    write_all(2, line);
  }

  // " on host H" when the job spans hosts.
  std::string where(int rank) const {
    for (const auto& l : launches_)
      if (l.rank == rank && !l.host.empty()) return " on host " + l.host;
    return "";
  }

  void set_reason(stop_reason reason, int exit_status) {
    if (reason_ != stop_reason::none) return;
    reason_ = reason;
    exit_status_ = exit_status;
  }

  const launch_options& opts_;
  const job_identity& job_;
  const std::vector<rank_launch>& launches_;
  supervisor_config config_;
  signal_pipe signals_;
  std::vector<rank_slot> slots_;
  int live_ = 0;  // ranks started and not yet reaped
  stop_reason reason_ = stop_reason::none;
  int exit_status_ = 0;
  std::optional<steady::time_point> job_deadline_;   // --timeout
  std::optional<steady::time_point> kill_deadline_;  // end of the grace period
  std::optional<steady::time_point> end_deadline_;   // elastic: ranks told to stop, until SIGTERM
  steady::time_point next_discovery_{};               // elastic: next run of the discovery script
  int next_worker_id_ = static_cast<int>(launches_.size());  // elastic: id of the next worker started
  std::set<std::string> said_;                        // messages said once
  bool finishing_ = false;                            // elastic: a worker exited 0
  std::string out_buf_;  // prefixed lines for chorusrun's stdout, not yet written
  std::string err_buf_;  // prefixed lines for chorusrun's stderr, not yet written
};

}  // namespace

int run_job(const launch_options& opts, const job_identity& job, const std::vector<rank_launch>& launches,
            const supervisor_config& config) {
  job_supervisor supervisor(opts, job, launches, config);
  return supervisor.run();
}

}  // namespace chorus::chorusrun
