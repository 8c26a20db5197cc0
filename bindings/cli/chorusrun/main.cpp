// chorusrun's entry point: parse the command line, draw the job's identity, run the job.
// Usage errors exit 2 with the usage text on stderr; everything else is run_job's status.
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "bindings/cli/chorusrun/job_env.hpp"
#include "bindings/cli/chorusrun/options.hpp"
#include "bindings/cli/chorusrun/supervisor.hpp"

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

  auto job = make_job_identity();
  if (!job) {
    write_text(2, "chorusrun: cannot set up the job: " + job.error().to_string() + "\n");
    return 1;
  }
  return run_job(*opts, *job);
}
