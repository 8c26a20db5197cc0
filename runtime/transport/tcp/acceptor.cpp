// Accept loop, silent-socket watch, eviction and handshake pool: admit expected (rank, stream)
// pairs once (acceptor.hpp gives the steps).
#include "runtime/transport/tcp/acceptor.hpp"

#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "runtime/core/log.hpp"

namespace chorus::tcp {

namespace {
constexpr int log_lines_per_second = 5;

long long ms_since(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t).count();
}
}  // namespace

struct acceptor::pending {
  enum class stage { silent, queued, handshaking, admitted, ended };
  unique_fd fd;
  std::string who;
  clock::time_point accepted;
  clock::time_point on_thread{};  // when a handshake thread took it
  stage at = stage::silent;
  clock::time_point deadline() const { return accepted + handshake_timeout; }
};

bool acceptor::evictable(const pending& p) {
  return p.at == pending::stage::silent || p.at == pending::stage::queued || p.at == pending::stage::handshaking;
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
    silent_.clear();
    for (auto& p : handshaking_) ::shutdown(p->fd.get(), SHUT_RDWR);  // ends their handshakes at once
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

int acceptor::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

int acceptor::evicted() const {
  std::lock_guard lock(mu_);
  return evicted_;
}

void acceptor::run() {
  std::vector<pollfd> fds;
  std::vector<short> revents;
  for (;;) {
    fds.assign({{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}});
    for (auto& p : silent_) fds.push_back({p->fd.get(), POLLIN, 0});
    int timeout_ms = -1;  // silent_ is in arrival order: its front is the first to expire
    if (!silent_.empty())
      timeout_ms = static_cast<int>(std::max<long long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(silent_.front()->deadline() - clock::now()).count() +
                 1));
    {
      std::lock_guard lock(mu_);  // connections wait for a thread: look again soon (free_stuck_threads)
      if (!queue_.empty() && (timeout_ms < 0 || timeout_ms > 50)) timeout_ms = 50;
    }
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0) continue;
    if (fds[1].revents) return;
    revents.clear();
    for (std::size_t i = 2; i < fds.size(); ++i) revents.push_back(fds[i].revents);
    sort_silent(revents);
    if ((fds[0].revents & POLLIN) && !accept_one()) return;
  }
}

void acceptor::sort_silent(const std::vector<short>& revents) {
  const auto now = clock::now();
  std::vector<refusal> expired;
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    std::vector<pending_ptr> still;
    for (std::size_t i = 0; i < silent_.size(); ++i) {
      auto& p = silent_[i];
      if (i < revents.size() && revents[i]) {  // spoke, or hung up: a handshake thread finds out which
        p->at = pending::stage::queued;
        queue_.push_back(std::move(p));
        queued = true;
      } else if (now >= p->deadline()) {
        expired.emplace_back(p->who, "sent nothing within " + std::to_string(handshake_timeout.count()) + " s");
        end(*p);
        p->fd.reset();
      } else {
        still.push_back(std::move(p));
      }
    }
    silent_ = std::move(still);
    free_stuck_threads(now, expired);
    // A thread for each queued connection that no idle one will take, up to the bound (a new
    // thread counts as idle only once it runs, so this may start more than needed, never more
    // than max_handshakes).
    for (std::size_t want = queue_.size(); want > static_cast<std::size_t>(idle_workers_) &&
                                           static_cast<int>(workers_.size()) < max_handshakes;
         --want)
      workers_.emplace_back([this] { work(); });
  }
  if (queued) work_cv_.notify_all();
  for (auto& [who, why] : expired) refuse(who, why);
}

bool acceptor::accept_one() {
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
      if (wake.revents) return false;
    }
    return true;
  }
  auto p = std::make_shared<pending>();
  p->fd = unique_fd(fd);
  p->who = peer_name(fd);
  p->accepted = clock::now();
  std::optional<refusal> evicted, full;
  {
    std::lock_guard lock(mu_);
    if (pending_count_ >= max_pending) evicted = evict_oldest();
    if (pending_count_ >= max_pending) {  // every slot past admission: finishing within moments
      full = refusal{p->who, "all " + std::to_string(max_pending) + " handshake slots are taken"};
    } else {
      ++pending_count_;
      arrivals_.push(p, evictable);
      silent_.push_back(std::move(p));
    }
  }
  // A peer of the job turned away for want of a slot dials again: a warning, not an error.
  if (evicted) refuse(evicted->first, evicted->second, true);
  if (full) refuse(full->first, full->second, true);
  return true;
}

std::optional<acceptor::refusal> acceptor::evict_oldest() {
  auto victim = arrivals_.pop_oldest(evictable);
  if (!victim) return std::nullopt;
  refusal r{victim->who, "evicted after " + std::to_string(ms_since(victim->accepted)) +
                             " ms without finishing its handshake: all " + std::to_string(max_pending) +
                             " handshake slots were taken"};
  switch (victim->at) {
    case pending::stage::silent:
      std::erase(silent_, victim);
      victim->fd.reset();
      break;
    case pending::stage::queued:
      std::erase(queue_, victim);
      victim->fd.reset();
      break;
    default:  // handshaking: its thread sees the socket end, closes it and leaves the count alone
      ::shutdown(victim->fd.get(), SHUT_RDWR);
      break;
  }
  end(*victim);
  ++evicted_;
  return r;
}

void acceptor::free_stuck_threads(clock::time_point now, std::vector<refusal>& out) {
  if (queue_.empty() || idle_workers_ > 0 || static_cast<int>(workers_.size()) < max_handshakes) return;
  for (std::size_t n = queue_.size(); n > 0; --n) {
    pending_ptr oldest;
    for (const auto& p : handshaking_)
      if (p->at == pending::stage::handshaking && now - p->on_thread >= stuck_handshake &&
          (!oldest || p->on_thread < oldest->on_thread))
        oldest = p;
    if (!oldest) return;
    out.emplace_back(oldest->who, "held a handshake thread for " + std::to_string(ms_since(oldest->on_thread)) +
                                      " ms while " + std::to_string(queue_.size()) +
                                      " connections waited for one (a real handshake takes milliseconds)");
    ::shutdown(oldest->fd.get(), SHUT_RDWR);  // its thread sees the socket end and takes the next
    end(*oldest);
    ++evicted_;
  }
}

void acceptor::end(pending& p) {
  if (p.at == pending::stage::ended) return;
  p.at = pending::stage::ended;
  --pending_count_;
}

void acceptor::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_workers_;
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_workers_;
    if (stopping_) return;
    pending_ptr p = std::move(queue_.front());
    queue_.pop_front();
    p->at = pending::stage::handshaking;
    p->on_thread = clock::now();
    handshaking_.insert(p);
    lock.unlock();
    handle(p);
    lock.lock();
    handshaking_.erase(p);
    end(*p);
    p->fd.reset();  // closed under the lock, so an eviction never shuts down a reused number
  }
}

void acceptor::refuse(const std::string& who, const std::string& why, bool dials_again) {
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
  if (!log) return;
  if (dials_again)
    CHORUS_LOG(warn, "tcp", "turned away connection from " << who << ": " << why << " (a peer of the job dials again)");
  else
    CHORUS_LOG(error, "tcp", "refused connection from " << who << ": " << why);
}

void acceptor::handle(const pending_ptr& p) {
  auto admit = [this, &p](const client_identity& c) -> status {
    std::lock_guard lock(mu_);
    if (p->at != pending::stage::handshaking)  // evicted while it proved the secret
      return status{errc::connection_lost, "evicted: all handshake slots were taken"};
    if (closed_) return status{errc::protocol, "the job's connections are complete; no connection expected"};
    if (c.rank <= cfg_.rank || c.rank >= cfg_.size || c.stream < 0 || c.stream >= cfg_.num_streams)
      return status{errc::protocol, "no connection expected from rank " + std::to_string(c.rank) + " stream " +
                                        std::to_string(c.stream)};
    if (inbound_[c.rank][c.stream].get() >= 0)
      return status{errc::protocol, "rank " + std::to_string(c.rank) + " stream " + std::to_string(c.stream) +
                                        " is already connected"};
    p->at = pending::stage::admitted;  // no longer evictable: the client is about to be told it is in
    return {};
  };
  // A slow or hostile client holds one handshake thread until its deadline at the latest.
  auto id = server_handshake(p->fd.get(), cfg_, p->deadline(), admit);
  std::unique_lock lock(mu_);
  if (!id) {
    const bool was_evicted = p->at == pending::stage::ended;  // counted and logged by evict_oldest
    lock.unlock();
    if (!was_evicted) refuse(p->who, id.error().to_string());
    return;
  }
  if (closed_ || inbound_[id->rank][id->stream].get() >= 0) {  // raced with completion or a twin
    lock.unlock();
    refuse(p->who, "rank " + std::to_string(id->rank) + " stream " + std::to_string(id->stream) +
                       " arrived after its place was taken");
    return;
  }
  CHORUS_LOG(debug, "tcp", "accepted rank=" << id->rank << " stream=" << id->stream << " from=" << p->who);
  inbound_[id->rank][id->stream] = std::move(p->fd);
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
