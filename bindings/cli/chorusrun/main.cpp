// chorusrun's entry point: parse the command line, draw the job's identity, run the job.
// Usage errors exit 2 with the usage text on stderr; everything else is run_job's status.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/elastic_coordinator.hpp"
#include "bindings/cli/chorusrun/job_env.hpp"
#include "bindings/cli/chorusrun/launch_plan.hpp"
#include "bindings/cli/chorusrun/options.hpp"
#include "bindings/cli/chorusrun/shm_cleanup.hpp"
#include "bindings/cli/chorusrun/supervisor.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  using namespace chorus::chorusrun;
  ensure_standard_fds();

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
  auto placements = plan_placements(*opts, this_host_name());
  if (!placements) {
    write_text(2, "chorusrun: " + placements.error().message() + "\n");
    return 2;
  }
  auto job = make_job_identity(*opts, *placements);
  if (!job) {
    write_text(2, "chorusrun: cannot set up the job: " + job.error().to_string() + "\n");
    return 1;
  }
  auto launches = plan_launch(*opts, *job, *placements, own_environment(), current_dir());
  if (!launches) {
    write_text(2, "chorusrun: " + launches.error().message() + "\n");
    return 2;
  }
  supervisor_config config;
  config.host_name = this_host_name();
  std::unique_ptr<elastic_coordinator> elastic;
  if (opts->elastic()) {
    // chorusrun serves the store (no rank is special) and starts every worker into round 0.
    auto started = elastic_coordinator::start(*job);
    std::vector<int> workers;
    for (const auto& l : *launches) workers.push_back(l.rank);
    chorus::status st = started ? (*started)->form_round(workers) : started.error();
    if (!st) {
      write_text(2, "chorusrun: cannot serve the elastic rendezvous store: " + st.message() + "\n");
      return 1;
    }
    elastic = std::move(*started);
    config.elastic = elastic.get();
  }
  int rc = run_job(*opts, *job, *launches, config);
  elastic.reset();
  remove_job_segments(job->job_id);  // whatever the ranks left in this host's /dev/shm
  return rc;
}
