// The supervision loop of chorusrun. One job, in steps:
//  1. Install the signal self-pipe, start ranks 0..N-1 (a failed start stops those started).
//  2. poll(2) the self-pipe and every rank's stdout/stderr pipe; relay whole prefixed lines
//     (output_relay.hpp).
//  3. On SIGCHLD reap; the first rank that fails stops the others: SIGTERM to every rank's
//     process group, SIGKILL when they outlive the grace period.
//  4. On SIGINT/SIGTERM forward that signal the same way; a second one sends SIGKILL at once.
//  5. When --timeout expires, stop the job as in step 3.
//  6. Once every rank is reaped: kill what is left in the ranks' groups, drain the pipes, flush.
// Elastic mode replaces step 3: every exit goes to the membership (elastic_membership.hpp),
// which forms rounds, starts and removes workers, and may end the job; this loop starts and
// signals the processes it asks for, and stops the job when it says so.
#include "bindings/cli/chorusrun/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/host_discovery.hpp"
#include "bindings/cli/chorusrun/output_relay.hpp"
#include "bindings/cli/chorusrun/rank_process.hpp"
#include "bindings/cli/chorusrun/signal_pipe.hpp"
#include "runtime/core/log.hpp"

namespace chorus::chorusrun {
namespace {

using steady = std::chrono::steady_clock;

enum class stop_reason { none, launcher_failed, rank_failed, interrupted, timed_out };

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

class job_supervisor {
 public:
  job_supervisor(const launch_options& opts, const job_identity& job, const std::vector<rank_launch>& launches,
                 const supervisor_config& config)
      : opts_(opts), job_(job), launches_(launches), config_(config) {}

  int run() {
    if (status st = signals_.open(); !st) {
      relay_.say("cannot install signal handlers: " + st.message());
      return 1;
    }
    if (opts_.timeout_seconds) {
      job_deadline_ = steady::now() + std::chrono::duration_cast<steady::duration>(
                                          std::chrono::duration<double>(*opts_.timeout_seconds));
    }
    start_ranks();
    if (config_.elastic && reason_ == stop_reason::none) start_membership();
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
      auto proc = spawn_rank(l.rank, l.argv, l.env, l.stdin_data, l.inherit_fd);
      // The rank has its own copy now (or never will): a listener kept open here would keep
      // the port after the rank is gone.
      if (l.inherit_fd >= 0) ::close(l.inherit_fd);
      if (!proc) {
        relay_.say("cannot start rank " + std::to_string(l.rank) + ": " + proc.error().message() +
                   "; stopping the job");
        set_reason(stop_reason::launcher_failed, 1);
        stop_all(SIGTERM);
        return;
      }
      slots_.push_back(make_slot(*proc, opts_.prefix_output));
      ++live_;
    }
  }

  // Elastic mode: the membership of round 0 (main formed it), with what it may ask of this loop.
  void start_membership() {
    membership_hooks hooks;
    hooks.say = [this](const std::string& m) { relay_.say(m); };
    hooks.start_worker = [this](int id, const placement& at, int world_size) {
      return start_worker(id, at, world_size);
    };
    hooks.signal_worker = [this](int id, int signo) {
      for (const auto& slot : slots_)
        if (slot.proc.rank == id) signal_rank(slot.proc, signo);
    };
    hooks.end_job = [this](bool told) {
      set_reason(stop_reason::rank_failed, 1);
      if (told) {
        end_deadline_ = steady::now() + config_.elastic_end_grace;
      } else {
        stop_all(SIGTERM);
      }
    };
    membership_ = std::make_unique<elastic_membership>(opts_, config_.elastic_timings, config_.host_name,
                                                       *config_.elastic, first_workers(launches_, config_.host_name),
                                                       std::move(hooks));
  }

  // A worker the membership adds: started like the first ones (directly or through the
  // launcher on its host), with its own id.
  bool start_worker(int id, const placement& at, int world_size) {
    auto l = config_.elastic_launch ? config_.elastic_launch(id, at, world_size)
                                    : result<rank_launch>(status{errc::internal, "no way to start workers"});
    auto proc = l ? spawn_rank(id, l->argv, l->env, l->stdin_data, -1) : result<rank_process>(l.error());
    if (!proc) {
      relay_.say("cannot start worker " + std::to_string(id) + " on host " + at.host + ": " + proc.error().message() +
                 "; no more workers there");
      return false;
    }
    hosts_[id] = at.host;
    slots_.push_back(make_slot(*proc, opts_.prefix_output));
    ++live_;
    return true;
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
        if (fds[k].revents != 0) relay_.read(slots_[owners[k - 1].first], owners[k - 1].second);
      }
      relay_.flush();
    }
    if (ready > 0 && fds[0].revents != 0) signals_.drain();
    handle_signals();
    if (membership_ && reason_ == stop_reason::none) membership_->tick();
    check_deadlines();
  }

  // Steps 3 and 4. SIGCHLD is not trusted to be one per child: every live rank is polled.
  void handle_signals() {
    for (int signo : {SIGINT, SIGTERM}) {
      for (int n = signals_.take(signo); n > 0; --n) on_interrupt(signo);
    }
    if (signals_.take(SIGCHLD) == 0) return;
    // By index: the membership may start workers (and grow slots_) while an exit is handled.
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].proc.reaped) continue;
      int st = 0;
      pid_t got = ::waitpid(slots_[i].proc.pid, &st, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) continue;
      slots_[i].proc.reaped = true;
      slots_[i].proc.wait_status = got < 0 ? 0 : st;  // ECHILD: reaped elsewhere, nothing to report
      --live_;
      on_rank_exit(i);
    }
  }

  void on_rank_exit(size_t index) {
    rank_slot& slot = slots_[index];
    const int st = slot.proc.wait_status;
    const int rank = slot.proc.rank;
    CHORUS_LOG(debug, "chorusrun", "rank exited rank=" << rank << " pid=" << slot.proc.pid
                                                        << " how=\"" << describe_exit(st) << "\"");
    if (reason_ != stop_reason::none) return;
    if (!exited_cleanly(st)) {
      // Print the rank's last words before the verdict.
      relay_.drain(slot, false);
      relay_.drain(slot, true);
      relay_.flush();
    }
    if (membership_) {
      const std::string host = where(rank);  // " on host H" across hosts
      membership_->on_exit(rank, st, (host.empty() ? "" : host.substr(1) + " ") + describe_exit(st));
      return;
    }
    if (exited_cleanly(st)) return;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    set_reason(stop_reason::rank_failed, code >= 1 && code <= 255 ? code : 1);
    relay_.say("rank " + std::to_string(rank) + where(rank) + " " + describe_exit(st) + "; stopping the job");
    stop_all(SIGTERM);
  }

  void on_interrupt(int signo) {
    if (reason_ == stop_reason::none) {
      set_reason(stop_reason::interrupted, 128 + signo);
      relay_.say(std::string("received ") + signal_name(signo) + "; forwarding it to all ranks");
      stop_all(signo);
    } else {
      relay_.say(std::string("received ") + signal_name(signo) + " while stopping; killing all ranks");
      stop_all(SIGKILL);
    }
  }

  // Without a working poll(2) the job cannot be supervised: kill it and wait for the ranks.
  void abandon(const std::string& why) {
    relay_.say(why + "; killing the job");
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
        relay_.say(msg.str());
        stop_all(SIGTERM);
      }
    }
    if (end_deadline_ && now >= *end_deadline_) {
      end_deadline_.reset();
      relay_.say("rank(s) told to stop are still running; stopping them");
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
      relay_.say(msg.str());
      stop_all(SIGKILL);
    }
  }

  int poll_timeout_ms() const {
    std::optional<steady::time_point> next;
    std::optional<steady::time_point> elastic;
    if (membership_ && reason_ == stop_reason::none) elastic = membership_->next_wakeup();
    for (const auto& d : {job_deadline_, kill_deadline_, end_deadline_, elastic}) {
      if (d && (!next || *d < *next)) next = d;
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
      relay_.drain(slot, false);
      relay_.drain(slot, true);
      relay_.close(slot, false);
      relay_.close(slot, true);
    }
    relay_.flush();
  }

  // " on host H" when the job spans hosts.
  std::string where(int rank) const {
    if (auto it = hosts_.find(rank); it != hosts_.end()) return " on host " + it->second;
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
  output_relay relay_;
  std::vector<rank_slot> slots_;
  std::unique_ptr<elastic_membership> membership_;  // elastic mode
  std::map<int, std::string> hosts_;                // elastic: hosts of the workers added
  int live_ = 0;  // ranks started and not yet reaped
  stop_reason reason_ = stop_reason::none;
  int exit_status_ = 0;
  std::optional<steady::time_point> job_deadline_;   // --timeout
  std::optional<steady::time_point> kill_deadline_;  // end of the grace period
  std::optional<steady::time_point> end_deadline_;   // elastic: ranks told to stop, until SIGTERM
};

}  // namespace

std::vector<worker_at> first_workers(const std::vector<rank_launch>& launches, const std::string& host_name) {
  std::vector<worker_at> out;
  for (const auto& l : launches) out.push_back({l.rank, l.host.empty() ? host_name : l.host});
  return out;
}

int run_job(const launch_options& opts, const job_identity& job, const std::vector<rank_launch>& launches,
            const supervisor_config& config) {
  job_supervisor supervisor(opts, job, launches, config);
  return supervisor.run();
}

}  // namespace chorus::chorusrun
