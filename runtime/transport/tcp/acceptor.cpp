// Accept loop and handshake pool: admit expected (rank, stream) pairs once.
#include "runtime/transport/tcp/acceptor.hpp"

#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>

#include "runtime/core/log.hpp"

namespace chorus::tcp {

namespace {
constexpr int log_lines_per_second = 5;
}

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
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
    for (int fd : in_handshake_) ::shutdown(fd, SHUT_RDWR);  // ends their handshakes at once
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
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
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        // Out of descriptors or memory: the mesh cannot complete. Say so to wait_inbound at
        // once (instead of a timeout naming missing streams), and stop polling a listener
        // whose pending connection would wake poll() again at once.
        std::lock_guard lock(mu_);
        if (resources_.ok())
          resources_ = status{errc::config, "rank " + std::to_string(cfg_.rank) + " cannot accept connections: " +
                                                std::strerror(e) +
                                                (e == EMFILE ? " (raise the open-file limit, ulimit -n: each peer takes " +
                                                                   std::to_string(cfg_.num_streams) + " connections)"
                                                             : std::string())};
        cv_.notify_all();
        pollfd wake{wake_.get(), POLLIN, 0};
        ::poll(&wake, 1, 100);
        if (wake.revents) return;
      }
      continue;
    }
    unique_fd conn(fd);
    std::unique_lock lock(mu_);
    if (queue_.size() >= max_queued) {
      lock.unlock();
      refuse(peer_name(conn.get()), "too many connections waiting for a handshake");
      continue;
    }
    queue_.push_back(std::move(conn));
    if (idle_workers_ == 0 && static_cast<int>(workers_.size()) < max_handshakes)
      workers_.emplace_back([this] { work(); });
    lock.unlock();
    work_cv_.notify_one();
  }
}

void acceptor::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_workers_;
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_workers_;
    if (stopping_) return;
    unique_fd fd = std::move(queue_.front());
    queue_.pop_front();
    in_handshake_.insert(fd.get());
    lock.unlock();
    int raw = fd.get();
    handle(std::move(fd));
    lock.lock();
    in_handshake_.erase(raw);
  }
}

void acceptor::refuse(const std::string& who, const std::string& why) {
  int summed = 0;
  bool log = false;
  {
    std::lock_guard lock(mu_);
    ++refused_;
    auto now = clock::now();
    if (now - log_window_ >= std::chrono::seconds(1)) {
      summed = unlogged_;
      unlogged_ = 0;
      logged_in_window_ = 0;
      log_window_ = now;
    }
    log = logged_in_window_ < log_lines_per_second;
    if (log) ++logged_in_window_;
    else ++unlogged_;
  }
  if (summed) CHORUS_LOG(error, "tcp", summed << " more connections were refused in the last second (not logged)");
  if (log) CHORUS_LOG(error, "tcp", "refused connection from " << who << ": " << why);
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
  // A slow or hostile client holds one handshake thread for at most this long.
  auto id = server_handshake(fd.get(), cfg_, clock::now() + handshake_timeout, admit);
  if (!id) {
    refuse(who, id.error().to_string());
    return;
  }
  std::unique_lock lock(mu_);
  if (closed_ || inbound_[id->rank][id->stream].get() >= 0) {  // raced with completion or a twin
    lock.unlock();
    refuse(who, "rank " + std::to_string(id->rank) + " stream " + std::to_string(id->stream) +
                    " arrived after its place was taken");
    return;
  }
  CHORUS_LOG(debug, "tcp", "accepted rank=" << id->rank << " stream=" << id->stream << " from=" << who);
  inbound_[id->rank][id->stream] = std::move(fd);
  if (--missing_ == 0) cv_.notify_all();
}

result<std::vector<std::vector<unique_fd>>> acceptor::wait_inbound(clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [this] { return missing_ == 0 || !resources_.ok(); });
  closed_ = true;
  if (missing_ > 0 && !resources_.ok()) return resources_;
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
