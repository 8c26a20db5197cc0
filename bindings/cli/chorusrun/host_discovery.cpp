// The host discovery script: one bounded run (spawned like a rank, its output read until EOF or
// the bound, then reaped), the parse of what it printed, and the wait for --min-np slots.
#include "bindings/cli/chorusrun/host_discovery.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <sstream>
#include <thread>

#include "bindings/cli/chorusrun/rank_process.hpp"
#include "runtime/config/variables.hpp"

extern char** environ;

namespace chorus::chorusrun {
namespace {

using clock = std::chrono::steady_clock;

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

// Reads what is there from a non-blocking fd; false at EOF or on an error.
bool read_some(int fd, std::string& into) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    into.append(buf, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EINTR);
}

}  // namespace

result<std::vector<host_slots>> parse_discovery(std::string_view text, const std::string& this_host) {
  std::vector<host_slots> out;
  std::istringstream in{std::string(text)};
  for (std::string raw; std::getline(in, raw);) {
    std::string line = trim(raw);
    if (line.empty()) continue;
    std::string host = line;
    int slots = 1;
    // "host:N"; an IPv6 address has several colons and no slots unless bracketed: [::1]:N.
    auto colon = line.rfind(':');
    bool bracketed = line.front() == '[';
    if (colon != std::string::npos && (bracketed || line.find(':') == colon)) {
      host = line.substr(0, colon);
      std::string n = line.substr(colon + 1);
      auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), slots);
      if (ec != std::errc() || end != n.data() + n.size() || slots < 1)
        return status{errc::invalid_argument, "--host-discovery-script printed '" + line +
                                                  "': expected 'host' or 'host:slots' with slots > 0"};
    }
    if (bracketed && host.size() > 2 && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host == this_host || is_loopback_name(host)) host = this_host;
    auto same = std::find_if(out.begin(), out.end(), [&](const host_slots& h) { return h.host == host; });
    if (same != out.end()) {
      same->slots += slots;
    } else {
      out.push_back({host, slots});
    }
  }
  return out;
}

result<std::string> run_discovery_script(const std::string& script, std::chrono::milliseconds bound) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  auto proc = spawn_rank(-1, {"sh", "-c", script}, env);
  if (!proc) return status{errc::config, "--host-discovery-script: " + proc.error().message()};
  const auto deadline = clock::now() + bound;
  std::string out, err;
  bool timed_out = false;
  while (proc->stdout_fd >= 0 || proc->stderr_fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{proc->stdout_fd, POLLIN, 0}, {proc->stderr_fd, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? proc->stdout_fd : proc->stderr_fd;
      if (fd >= 0 && fds[i].revents != 0 && !read_some(fd, i == 0 ? out : err)) {
        ::close(fd);
        fd = -1;
      }
    }
  }
  if (timed_out) signal_rank(*proc, SIGKILL);
  for (int fd : {proc->stdout_fd, proc->stderr_fd})
    if (fd >= 0) ::close(fd);
  int st = 0;
  while (::waitpid(proc->pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return status{errc::config, "--host-discovery-script '" + script + "' ran longer than " +
                                    std::to_string(bound.count()) + " ms; killed"};
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return status{errc::config, "--host-discovery-script '" + script + "' failed (" +
                                    (WIFEXITED(st) ? "exit status " + std::to_string(WEXITSTATUS(st))
                                                   : std::string("killed by a signal")) +
                                    "): " + err.substr(0, 200)};
  return out;
}

std::optional<std::vector<host_slots>> offered_hosts(const std::string& script, const std::string& this_host,
                                                     std::chrono::milliseconds bound,
                                                     const std::function<void(const std::string&)>& say_once) {
  auto out = run_discovery_script(script, bound);
  auto hosts = out ? parse_discovery(*out, this_host) : result<std::vector<host_slots>>(out.error());
  if (!hosts) {
    say_once(hosts.error().message() + "; keeping the workers as they are");
    return std::nullopt;
  }
  return std::move(*hosts);
}

int total_slots(const std::vector<host_slots>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += h.slots;
  return n;
}

result<std::vector<host_slots>> wait_for_slots(const std::string& script, const std::string& this_host, int min_np,
                                               std::chrono::duration<double> timeout,
                                               std::chrono::milliseconds interval, std::chrono::milliseconds bound,
                                               const std::function<void(const std::string&)>& say) {
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(timeout);
  std::string last = "no answer";
  bool said_wait = false;
  while (true) {
    auto out = run_discovery_script(script, bound);
    auto hosts = out ? parse_discovery(*out, this_host) : result<std::vector<host_slots>>(out.error());
    if (hosts && total_slots(*hosts) >= min_np) return std::move(*hosts);
    last = hosts ? std::to_string(total_slots(*hosts)) + " slot(s)" : hosts.error().message();
    if (clock::now() + interval > deadline) break;
    if (!said_wait) {
      say("--host-discovery-script offers " + last + ", fewer than --min-np " + std::to_string(min_np) +
          ": waiting up to --elastic-timeout " + cfg::number_text(timeout.count()) + " s before starting workers");
      said_wait = true;
    }
    std::this_thread::sleep_for(interval);
  }
  return status{errc::config, "--host-discovery-script offered fewer than --min-np " + std::to_string(min_np) +
                                  " slots within --elastic-timeout " + cfg::number_text(timeout.count()) +
                                  " s (last: " + last + "); no worker started"};
}

}  // namespace chorus::chorusrun
