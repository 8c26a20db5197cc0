// Accept loop: handshake each newcomer, admit expected (rank, stream) pairs once.
#include "runtime/transport/tcp/acceptor.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>

#include "runtime/core/log.hpp"

namespace chorus::tcp {

acceptor::acceptor(unique_fd listener, handshake_config cfg)
    : listener_(std::move(listener)), wake_(::eventfd(0, EFD_CLOEXEC)), cfg_(std::move(cfg)) {
  inbound_.resize(cfg_.size);
  for (int p = cfg_.rank + 1; p < cfg_.size; ++p) inbound_[p].resize(cfg_.num_streams);
  missing_ = (cfg_.size - cfg_.rank - 1) * cfg_.num_streams;
  thread_ = std::thread([this] { run(); });
}

acceptor::~acceptor() {
  uint64_t one = 1;
  ssize_t rc = ::write(wake_.get(), &one, sizeof one);
  (void)rc;
  if (thread_.joinable()) thread_.join();
}

int acceptor::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

void acceptor::run() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0) continue;
    if (fds[1].revents) return;
    if (fds[0].revents & POLLIN) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) handle(unique_fd(fd));
    }
  }
}

void acceptor::handle(unique_fd fd) {
  std::string who = peer_name(fd.get());
  auto admit = [this](const client_identity& c) -> status {
    std::lock_guard lock(mu_);
    if (closed_) return status{errc::protocol, "the job's connections are complete; no connection expected"};
    if (c.rank <= cfg_.rank || c.rank >= cfg_.size || c.stream < 0 || c.stream >= cfg_.num_streams)
      return status{errc::protocol, "no connection expected from rank " + std::to_string(c.rank) + " stream " +
                                        std::to_string(c.stream)};
    if (inbound_[c.rank][c.stream].get() >= 0)
      return status{errc::protocol, "rank " + std::to_string(c.rank) + " stream " + std::to_string(c.stream) +
                                        " is already connected"};
    return {};
  };
  // A slow or hostile client holds the accept loop for at most this long.
  auto deadline = clock::now() + std::chrono::seconds(5);
  auto id = server_handshake(fd.get(), cfg_, deadline, admit);
  std::lock_guard lock(mu_);
  if (!id) {
    ++refused_;
    CHORUS_LOG(error, "tcp", "refused connection from " << who << ": " << id.error().to_string());
    return;
  }
  if (closed_ || inbound_[id->rank][id->stream].get() >= 0) {  // raced with completion
    ++refused_;
    return;
  }
  CHORUS_LOG(debug, "tcp", "accepted rank=" << id->rank << " stream=" << id->stream << " from=" << who);
  inbound_[id->rank][id->stream] = std::move(fd);
  if (--missing_ == 0) cv_.notify_all();
}

result<std::vector<std::vector<unique_fd>>> acceptor::wait_inbound(clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [this] { return missing_ == 0; });
  closed_ = true;
  if (missing_ > 0) {
    std::ostringstream os;
    os << "rank " << cfg_.rank << " waited for connections that never arrived from:";
    for (int p = cfg_.rank + 1; p < cfg_.size; ++p) {
      int n = 0;
      for (auto& fd : inbound_[p]) n += fd.get() < 0;
      if (n) os << " rank " << p << " (" << n << " of " << cfg_.num_streams << " streams)";
    }
    return status{errc::timeout, os.str()};
  }
  return std::move(inbound_);
}

}  // namespace chorus::tcp
