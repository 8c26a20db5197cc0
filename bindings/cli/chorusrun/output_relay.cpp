// Reading the ranks' pipes and writing their prefixed lines, and chorusrun's own, to fds 1 and 2.
#include "bindings/cli/chorusrun/output_relay.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace chorus::chorusrun {
namespace {

// Writes all of `buf` to `fd` and clears it; gives up on an error other than EINTR/EAGAIN.
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

}  // namespace

rank_slot make_slot(const rank_process& proc, bool prefix) {
  std::string p = prefix ? "[" + std::to_string(proc.rank) + "] " : "";
  return rank_slot{proc, line_prefixer(p), line_prefixer(p)};
}

bool output_relay::read(rank_slot& slot, bool is_err) {
  int fd = is_err ? slot.proc.stderr_fd : slot.proc.stdout_fd;
  if (fd < 0) return false;
  char buf[64 * 1024];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    (is_err ? slot.err : slot.out).feed({buf, static_cast<size_t>(n)}, is_err ? err_buf_ : out_buf_);
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  close(slot, is_err);  // EOF, or an error that makes the pipe useless
  return false;
}

void output_relay::drain(rank_slot& slot, bool is_err, int max_reads) {
  for (int i = 0; i < max_reads && read(slot, is_err); ++i) {
  }
}

void output_relay::close(rank_slot& slot, bool is_err) {
  int& fd = is_err ? slot.proc.stderr_fd : slot.proc.stdout_fd;
  if (fd < 0) return;
  ::close(fd);
  fd = -1;
  (is_err ? slot.err : slot.out).finish(is_err ? err_buf_ : out_buf_);
}

void output_relay::flush() {
  write_all(1, out_buf_);
  write_all(2, err_buf_);
}

void output_relay::say(const std::string& message) {
  flush();
  std::string line = "chorusrun: " + message + "\n";
  write_all(2, line);
}

}  // namespace chorus::chorusrun
