// The control link (control_link.hpp): direct non-blocking writes, one poll(2) thread for
// reads and for what the kernel did not take at once.
#include "runtime/transport/tcp/control_link.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "runtime/core/log.hpp"

namespace chorus::tcp {

namespace {

constexpr std::size_t message_head = control_link::message_head;

std::vector<std::byte> frame_of(const wire::frame_limits& limits, wire::frame_kind kind, uint8_t ckind, int32_t origin,
                                std::span<const uint8_t> data) {
  bool control = kind == wire::frame_kind::control;
  std::size_t payload = control ? message_head + data.size() : 0;
  std::vector<std::byte> out(wire::frame_header_size + payload);
  wire::frame_header h;
  h.kind = kind;
  h.job_id = limits.job_id;
  h.length = static_cast<uint32_t>(payload);
  wire::encode(h, out.data());
  if (control) {
    auto* p = out.data() + wire::frame_header_size;
    p[0] = static_cast<std::byte>(ckind);
    auto o = static_cast<uint32_t>(origin);
    for (int i = 0; i < 4; ++i) p[1 + i] = static_cast<std::byte>((o >> (8 * i)) & 0xff);
    if (!data.empty()) std::memcpy(p + message_head, data.data(), data.size());
  }
  return out;
}

}  // namespace

std::string control_link::who(int peer) const {
  const auto p = static_cast<std::size_t>(peer);
  return "rank " + std::to_string(peer) + (p < hosts_.size() && !hosts_[p].empty() ? " on " + hosts_[p] : "");
}

struct control_link::conn {
  int peer = -1;
  unique_fd fd;
  std::mutex mu;                 // guards out, writable, broken, goodbye_sent (senders and the thread)
  std::vector<std::byte> out;    // bytes the kernel has not taken yet, in order
  bool writable = true;          // false after our goodbye or once broken: send() refuses
  bool broken = false;           // a write failed or the connection ended badly: out is dropped
  bool goodbye_sent = false;
  std::string write_error;       // why the first failed write failed (strerror), for the read side's report
  // The link's thread only:
  control_assembler frames{wire::frame_limits{}};  // set to the job's limits at construction
  bool ended = false;     // nothing more will be read
  bool reported = false;  // on_closed was called (or suppressed by close)
  clock::time_point last_heard = clock::now();  // any bytes from the peer

  /// Writes `bytes` after what is queued; false if the connection cannot be written.
  /// Sets `queued` when bytes are left for the thread. Call with mu held.
  bool write_locked(const std::vector<std::byte>& bytes, bool& queued) {
    std::size_t done = 0;
    if (out.empty()) {
      ssize_t n = ::send(fd.get(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          writable = false;  // the read side reports the cause
          broken = true;
          if (write_error.empty()) write_error = std::strerror(errno);
          out.clear();
          return false;
        }
        n = 0;
      }
      done = static_cast<std::size_t>(n);
    }
    if (done < bytes.size()) {
      out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(done), bytes.end());
      queued = true;
    }
    return true;
  }
};

control_link::control_link(int rank, std::vector<unique_fd> fds, const wire::frame_limits& limits,
                           std::chrono::milliseconds peer_timeout, std::vector<std::string> hosts)
    : rank_(rank),
      hosts_(std::move(hosts)),
      limits_(limits),
      peer_timeout_(peer_timeout),
      // Six beats per timeout: a few lost to a slow scheduler still leave the peer alive.
      beat_interval_(std::clamp(peer_timeout / 6, std::chrono::milliseconds(10), std::chrono::milliseconds(5000))),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  conns_.resize(fds.size());
  for (std::size_t p = 0; p < fds.size(); ++p) {
    if (fds[p].get() < 0) continue;
    auto c = std::make_unique<conn>();
    c->peer = static_cast<int>(p);
    c->fd = std::move(fds[p]);
    c->frames = control_assembler(limits_);
    conns_[p] = std::move(c);
  }
}

control_link::~control_link() { close(std::chrono::milliseconds(200)); }

void control_link::start(handlers h) {
  handlers_ = std::move(h);
  thread_ = std::thread([this] { run(); });
}

bool control_link::send(int to, uint8_t kind, int32_t origin, std::span<const uint8_t> data) {
  if (to < 0 || to >= size() || !conns_[static_cast<std::size_t>(to)]) return false;
  if (data.size() > max_message_bytes()) {
    CHORUS_LOG(error, "tcp", "control message of " << data.size() << " bytes to " << who(to)
                                                   << " is over the frame limit; dropped");
    return false;
  }
  auto& c = *conns_[static_cast<std::size_t>(to)];
  auto bytes = frame_of(limits_, wire::frame_kind::control, kind, origin, data);
  bool queued = false, ok = false;
  {
    std::lock_guard lk(c.mu);
    if (!c.writable || closing_.load(std::memory_order_acquire)) return false;
    ok = c.write_locked(bytes, queued);
  }
  if (queued) wake();
  return ok;
}

void control_link::say_goodbye(conn& c) {
  bool queued = false;
  {
    std::lock_guard lk(c.mu);
    if (c.goodbye_sent || !c.writable) return;
    c.goodbye_sent = true;
    c.write_locked(frame_of(limits_, wire::frame_kind::goodbye, 0, 0, {}), queued);
    c.writable = false;  // nothing may follow a goodbye
  }
  if (queued) wake();
}

void control_link::wake() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
}

std::size_t control_link::backlog_bytes() {
  std::size_t n = 0;
  for (auto& c : conns_)
    if (c) {
      std::lock_guard lk(c->mu);
      n += c->out.size();
    }
  return n;
}

void control_link::flush(conn& c) {
  std::lock_guard lk(c.mu);
  std::size_t done = 0;
  while (done < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + done, c.out.size() - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {  // the read side reports the cause
        c.writable = false;
        c.broken = true;
        if (c.write_error.empty()) c.write_error = std::strerror(errno);
        c.out.clear();
        return;
      }
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(done));
}

void control_link::refuse(conn& c, const status& why) {
  // Best effort, without waiting: the idle control connection's send buffer has room for it.
  std::string text = why.to_string();
  std::vector<std::byte> frame(wire::frame_header_size + text.size());
  wire::frame_header h;
  h.kind = wire::frame_kind::abort;
  h.job_id = limits_.job_id;
  h.length = static_cast<uint32_t>(std::min<std::size_t>(text.size(), limits_.max_payload));
  wire::encode(h, frame.data());
  std::memcpy(frame.data() + wire::frame_header_size, text.data(), h.length);
  {
    std::lock_guard lk(c.mu);
    if (c.out.empty() && !c.broken)
      (void)::send(c.fd.get(), frame.data(), wire::frame_header_size + h.length, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  end(c, why);
  ::shutdown(c.fd.get(), SHUT_RDWR);
}

std::string control_link::write_note(conn& c) {
  std::lock_guard lk(c.mu);
  return c.write_error.empty() ? "" : " (writing to it had failed: " + c.write_error + ")";
}

void control_link::end(conn& c, const status& why) {
  c.ended = true;
  {
    std::lock_guard lk(c.mu);
    c.writable = false;
    c.broken = true;
    c.out.clear();
  }
  report(c, why, false);
}

void control_link::report(conn& c, const status& why, bool clean) {
  if (c.reported) return;
  c.reported = true;
  if (closing_.load(std::memory_order_acquire)) return;
  if (!clean) CHORUS_LOG(debug, "tcp", "control link: " << why.message());
  if (handlers_.on_closed) handlers_.on_closed(c.peer, why, clean);
}

void control_link::read_from(conn& c) {
  for (int reads = 0; reads < 16; ++reads) {  // then the other peers get their turn (poll is level-triggered)
    auto room = c.frames.space();
    ssize_t n = ::recv(c.fd.get(), room.data(), room.size(), MSG_DONTWAIT);
    if (n == 0) {
      if (c.frames.goodbye_received()) c.ended = true;
      else
        end(c, {errc::connection_lost, "the control connection of " + who(c.peer) +
                                           " closed without a goodbye (the process exited or was killed)" +
                                           write_note(c)});
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (c.frames.goodbye_received()) c.ended = true;
      else {
        std::string reason = std::strerror(errno);
        end(c, {errc::connection_lost,
                "the control connection of " + who(c.peer) + " failed: " + reason + write_note(c)});
      }
      return;
    }
    c.last_heard = clock::now();
    // Every complete frame, in order (control_frames.hpp).
    bool stop = false;
    auto st = c.frames.received(static_cast<std::size_t>(n), [&](const control_frame& f) {
      switch (f.what) {
        case control_frame::type::heartbeat:
          return true;  // last_heard is all it is for
        case control_frame::type::abort: {  // the peer refused something we sent, and says what
          auto why = status_from_string(std::string(f.data.begin(), f.data.end()), errc::protocol);
          end(c, {why.code(), why.message() + " (passed on by " + who(c.peer) + ")"});
          stop = true;
          return false;
        }
        case control_frame::type::goodbye:
          say_goodbye(c);  // the peer's close waits for ours
          report(c, {errc::shutdown, who(c.peer) + " left the job (it shut down)"}, true);
          return !c.ended;  // and read on until its EOF
        case control_frame::type::message:
          if (!closing_.load(std::memory_order_acquire) && handlers_.on_message)
            handlers_.on_message(c.peer, f.kind, f.origin, std::vector<uint8_t>(f.data.begin(), f.data.end()));
          return !c.ended;
      }
      return true;
    });
    if (!st.ok()) {
      refuse(c, {st.code(), who(c.peer) + " " + st.message()});
      return;
    }
    if (stop || c.ended) return;
  }
}

int control_link::keep_alive() {
  if (peer_timeout_.count() <= 0) return -1;
  auto now = clock::now();
  bool beat = now >= next_beat_;
  if (beat) next_beat_ = now + beat_interval_;
  auto next = next_beat_;
  for (auto& c : conns_) {
    if (!c || c->ended || c->frames.goodbye_received()) continue;
    if (now - c->last_heard >= peer_timeout_) {
      auto secs = std::chrono::duration<double>(now - c->last_heard).count();
      std::ostringstream why;
      why << who(c->peer) << " sent nothing on its control connection for " << std::fixed << std::setprecision(1)
          << secs << " s (its runtime sends a heartbeat every " << beat_interval_.count()
          << " ms): the process is frozen (stopped, hung host) or the network to it is partitioned; "
             "CHORUS_PEER_TIMEOUT_SECONDS="
          << std::chrono::duration_cast<std::chrono::seconds>(peer_timeout_).count() << " sets this bound";
      end(*c, {errc::connection_lost, why.str()});
      ::shutdown(c->fd.get(), SHUT_RDWR);
      continue;
    }
    next = std::min(next, c->last_heard + peer_timeout_);
    if (beat) {
      bool queued = false;
      {
        std::lock_guard lk(c->mu);
        if (c->writable) c->write_locked(frame_of(limits_, wire::frame_kind::heartbeat, 0, 0, {}), queued);
      }
      if (queued) wake();
    }
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 1, 60000));
}

bool control_link::settled() {
  for (auto& c : conns_) {
    if (!c) continue;
    if (!c->ended && !c->frames.goodbye_received()) return false;
    std::lock_guard lk(c->mu);
    if (!c->out.empty() && !c->broken) return false;  // e.g. our goodbye still queued
  }
  return true;
}

void control_link::run() {
  std::vector<pollfd> fds;
  std::vector<conn*> who_of;
  for (;;) {
    bool closing = closing_.load(std::memory_order_acquire);
    if (closing && (settled() || clock::now() >= close_deadline_)) break;
    int due = closing ? -1 : keep_alive();
    fds.assign(1, pollfd{wake_.get(), POLLIN, 0});
    who_of.assign(1, nullptr);
    for (auto& c : conns_) {
      if (!c || c->ended) continue;
      short ev = POLLIN;
      {
        std::lock_guard lk(c->mu);
        if (!c->out.empty()) ev |= POLLOUT;
      }
      fds.push_back({c->fd.get(), ev, 0});
      who_of.push_back(c.get());
    }
    int timeout = wake_.get() < 0 ? 10 : -1;  // without the eventfd, look for new backlog and close by polling
    if (due >= 0) timeout = timeout < 0 ? due : std::min(timeout, due);
    if (closing) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(close_deadline_ - clock::now()).count();
      timeout = static_cast<int>(std::max<int64_t>(1, left));
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      CHORUS_LOG(error, "tcp", "control link: poll failed: " << std::strerror(errno));
      break;
    }
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      uint64_t v = 0;
      [[maybe_unused]] auto r = ::read(wake_.get(), &v, sizeof v);
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      auto& c = *who_of[i];
      if (fds[i].revents & POLLOUT) flush(c);
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(c);
    }
  }
}

void control_link::close(std::chrono::milliseconds grace) {
  {
    std::lock_guard lk(close_mu_);
    if (closed_) return;
    closed_ = true;
  }
  close_deadline_ = clock::now() + grace;
  closing_.store(true, std::memory_order_release);
  for (auto& c : conns_)
    if (c) say_goodbye(*c);
  wake();
  if (thread_.joinable()) thread_.join();
  handlers_ = {};  // they may hold actor handles: let them go with the link's close
  for (auto& c : conns_)
    if (c) c->fd.reset();
}

}  // namespace chorus::tcp
