// chorusrun's entry point: parse the command line, draw the job's identity, run the job.
// Usage errors exit 2 with the usage text on stderr; everything else is run_job's status.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/elastic_coordinator.hpp"
#include "bindings/cli/chorusrun/host_discovery.hpp"
#include "bindings/cli/chorusrun/job_env.hpp"
#include "bindings/cli/chorusrun/launch_plan.hpp"
#include "bindings/cli/chorusrun/options.hpp"
#include "bindings/cli/chorusrun/shm_cleanup.hpp"
#include "bindings/cli/chorusrun/supervisor.hpp"
#include "runtime/config/config.hpp"
#include "runtime/config/reader.hpp"

extern char** environ;

namespace {

void write_text(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// If chorusrun was started with stdin, stdout or stderr closed, a pipe created later could take
// fd 0-2 and be clobbered when a rank's streams are set up; park /dev/null there instead.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

std::string this_host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::string current_dir() {
  char buf[4096] = {};
  return ::getcwd(buf, sizeof buf) ? buf : "/";
}

std::vector<std::string> own_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

// The first workers of an elastic job: on -H/--hostfile's hosts; else, with a discovery script,
// on the hosts it offers once they have --min-np slots (up to -np workers; horovodrun waits the
// same --elastic-timeout); else -np on this host. This host's names become `host_name`, as the
// script's lines do, so that both name a host alike.
chorus::result<std::vector<chorus::chorusrun::placement>> elastic_placements(chorus::chorusrun::launch_options& opts,
                                                                             const std::string& host_name) {
  using namespace chorus::chorusrun;
  for (auto& h : opts.hosts)
    if (is_loopback_name(h.host)) h.host = host_name;
  if (!opts.hosts.empty() || !opts.discovery_script) return plan_placements(opts, host_name);
  const elastic_timing timing;
  auto offered = wait_for_slots(*opts.discovery_script, host_name, opts.min_np.value_or(opts.num_ranks),
                                std::chrono::duration<double>(*opts.elastic_timeout_seconds),
                                timing.discovery_interval, timing.discovery_bound,
                                [](const std::string& m) { write_text(2, "chorusrun: " + m + "\n"); });
  if (!offered) return offered.error();
  return place_ranks(*offered, std::min(opts.num_ranks, total_slots(*offered)));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace chorus::chorusrun;
  ensure_standard_fds();
  chorus::apply_log_level(chorus::cfg::process_lookup());

  auto opts = parse_options({argv, static_cast<size_t>(argc)});
  if (!opts) {
    write_text(2, "chorusrun: " + opts.error().message() + "\n" + usage_text());
    return 2;
  }
  if (opts->show_help) {
    write_text(1, usage_text());
    return 0;
  }

  if (opts->hostfile) {
    std::ifstream in(*opts->hostfile);
    if (!in) {
      write_text(2, "chorusrun: cannot read --hostfile '" + *opts->hostfile + "'\n");
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto hosts = parse_hostfile(text.str(), *opts->hostfile);
    if (!hosts) {
      write_text(2, "chorusrun: " + hosts.error().message() + "\n");
      return 2;
    }
    opts->hosts = std::move(*hosts);
    opts->hostfile.reset();
  }
  if (auto st = check_options(*opts); !st.ok()) {
    write_text(2, "chorusrun: " + st.message() + "\n" + usage_text());
    return 2;
  }
  if (opts->elastic() && !opts->elastic_timeout_seconds) {
    // horovodrun's convention: the option, else HOROVOD_ELASTIC_TIMEOUT (here also
    // CHORUS_ELASTIC_TIMEOUT_SECONDS), else 600 s.
    auto seconds = chorus::cfg::reader(chorus::cfg::process_lookup()).decimal("CHORUS_ELASTIC_TIMEOUT_SECONDS");
    if (!seconds) {
      write_text(2, "chorusrun: " + seconds.error().message() + "\n");
      return 2;
    }
    opts->elastic_timeout_seconds = *seconds;
  }
  const std::string host_name = this_host_name();
  auto placements = opts->elastic() ? elastic_placements(*opts, host_name) : plan_placements(*opts, host_name);
  if (!placements) {
    write_text(2, "chorusrun: " + placements.error().message() + "\n");
    return placements.error().code() == chorus::errc::invalid_argument ? 2 : 1;
  }
  auto job = make_job_identity(*opts, *placements, host_name);
  if (!job) {
    write_text(2, "chorusrun: cannot set up the job: " + job.error().to_string() + "\n");
    return 1;
  }
  const auto base_env = own_environment();
  const auto workdir = current_dir();
  auto launches = plan_launch(*opts, *job, *placements, base_env, workdir, host_name);
  if (!launches) {
    write_text(2, "chorusrun: " + launches.error().message() + "\n");
    return 2;
  }
  supervisor_config config;
  config.host_name = host_name;
  std::unique_ptr<elastic_coordinator> elastic;
  if (opts->elastic()) {
    // chorusrun serves the store (no rank is special) and starts every worker into round 0.
    auto started = elastic_coordinator::start(*job);
    chorus::status st = started ? (*started)->form_round(first_workers(*launches, host_name)) : started.error();
    if (!st) {
      write_text(2, "chorusrun: cannot serve the elastic rendezvous store: " + st.message() + "\n");
      return 1;
    }
    elastic = std::move(*started);
    config.elastic = elastic.get();
    config.elastic_launch = [&](int worker, const placement& at, int world_size) {
      return elastic_worker_launch(*opts, *job, at, world_size, worker, base_env, workdir, host_name);
    };
  }
  int rc = run_job(*opts, *job, *launches, config);
  elastic.reset();
  remove_job_segments(job->job_id);  // whatever the ranks left in this host's /dev/shm
  return rc;
}
