// The store server: an Asio acceptor and one session per client connection (kv_session.hpp),
// all on one thread, so the store needs no lock.
#include "runtime/rendezvous/kv_server.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/core/log.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/kv_session.hpp"

namespace chorus {
namespace {

using asio::ip::tcp;

using kv::session;
using kv::store_state;

}  // namespace

struct kv_server::impl {
  asio::io_context io;  // first: destroyed last, after everything that uses it
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  store_state store;
  std::thread thread;
  std::mutex mu;  // guards started/stopped against concurrent start/stop
  bool started = false;
  bool stopped = false;
  std::atomic<uint16_t> port{0};
  std::string connect_host;

  void accept() {
    acceptor.async_accept([this](asio::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open() || ec == asio::error::operation_aborted) return;
      if (ec) {
        // E.g. out of file descriptors: back off instead of spinning on the error.
        CHORUS_LOG(warn, "rendezvous", "accept failed: " << ec.message() << "; retrying in 50 ms");
        accept_retry.expires_after(std::chrono::milliseconds(50));
        accept_retry.async_wait([this](asio::error_code wait_ec) {
          if (!wait_ec && acceptor.is_open()) accept();
        });
        return;
      }
      asio::error_code ignored;
      // Every handshake slot taken: the oldest connection still in its handshake makes room. A
      // real client proves the secret within a few round trips, so silent ones, which hold a
      // slot until the handshake timeout, are the ones that go, and cannot stall a job's start.
      if (store.handshaking >= store.limits.max_handshaking && store.limits.max_handshaking > 0) evict_oldest();
      if (store.sessions.size() >= store.limits.max_connections || store.handshaking >= store.limits.max_handshaking) {
        auto ep = socket.remote_endpoint(ignored);
        store.refused(ignored ? std::string("unknown peer") : format_host_port(ep.address().to_string(), ep.port()),
                      std::to_string(store.sessions.size()) + " connections, " + std::to_string(store.handshaking) +
                          " of them in their handshake (limits " + std::to_string(store.limits.max_connections) +
                          " and " + std::to_string(store.limits.max_handshaking) + ")");
        socket.close(ignored);
        return accept();
      }
      socket.set_option(tcp::no_delay(true), ignored);
      auto s = std::make_shared<session>(std::move(socket), store);
      store.sessions.insert(s);
      store.arrivals.push(s, in_handshake);
      s->start();
      accept();
    });
  }

  // Closes the connection that has been in its handshake longest (see accept()).
  void evict_oldest() {
    auto oldest = store.arrivals.pop_oldest(in_handshake);
    if (!oldest) return;
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                        oldest->accepted_at());
    oldest->evict("evicted after " + std::to_string(waited.count()) + " ms without finishing its handshake: all " +
                  std::to_string(store.limits.max_handshaking) + " handshake slots were taken");
  }
  static bool in_handshake(const session& s) { return s.in_handshake(); }

  // Tries each candidate address until one binds. Returns the system's last complaint.
  result<uint16_t> serve(const std::string& shown);

  std::string bind_first(const std::vector<tcp::endpoint>& candidates, bool dual_stack) {
    std::string last_error = "no address to bind";
    for (const auto& ep : candidates) {
      asio::error_code ec;
      acceptor.open(ep.protocol(), ec);
      if (!ec && dual_stack && ep.address().is_v6())
        acceptor.set_option(asio::ip::v6_only(false), ec);
      if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) acceptor.bind(ep, ec);
      if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
      if (!ec) return {};
      last_error = ec.message();
      if (ec == asio::error::address_in_use) last_error += " (another process holds this port)";
      asio::error_code ignored;
      acceptor.close(ignored);
    }
    return last_error;
  }
};

kv_server::kv_server(kv::credentials creds, kv_server_limits limits) : impl_(std::make_unique<impl>()) {
  impl_->store.creds = std::move(creds);
  impl_->store.limits = limits;
}

kv_server::~kv_server() { stop(); }

result<uint16_t> kv_server::start(const std::string& host, uint16_t port) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started) return status{errc::internal, "kv_server::start called twice"};
  std::string shown = format_host_port(host.empty() ? "*" : host, port);

  std::vector<tcp::endpoint> candidates;
  if (host.empty()) {
    candidates = {tcp::endpoint(asio::ip::address_v6::any(), port),
                  tcp::endpoint(asio::ip::address_v4::any(), port)};
  } else {
    asio::error_code ec;
    tcp::resolver resolver(impl_->io);
    auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec)
      return status{errc::rendezvous,
                    "cannot listen on " + shown + ": resolving the host failed: " + ec.message()};
    for (const auto& entry : found) candidates.push_back(entry.endpoint());
  }
  if (auto why = impl_->bind_first(candidates, host.empty()); !why.empty()) {
    return status{errc::rendezvous, "cannot listen on " + shown + ": " + why};
  }

  return impl_->serve(shown);
}

result<uint16_t> kv_server::start_on(int listening_fd) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started) return status{errc::internal, "kv_server::start_on called after a start"};
  std::string shown = "inherited socket " + std::to_string(listening_fd);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(listening_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return status{errc::rendezvous, "cannot serve on " + shown + ": " + std::strerror(errno)};
  int copy = ::fcntl(listening_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0)
    return status{errc::rendezvous, "cannot serve on " + shown + ": dup: " + std::strerror(errno)};
  asio::error_code ec;
  impl_->acceptor.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), copy, ec);
  if (ec) {
    ::close(copy);
    return status{errc::rendezvous, "cannot serve on " + shown + ": " + ec.message()};
  }
  return impl_->serve(shown);
}

// After the acceptor listens: records the address, starts accepting and the server thread.
// Called with mu held.
result<uint16_t> kv_server::impl::serve(const std::string& shown) {
  asio::error_code ec;
  auto bound = acceptor.local_endpoint(ec);
  if (ec)
    return status{errc::rendezvous,
                  "cannot read the bound address of " + shown + ": " + ec.message()};
  port = bound.port();
  connect_host =
      bound.address().is_unspecified()
          ? std::string("127.0.0.1")  // dual-stack :: and 0.0.0.0 both take IPv4 loopback
          : bound.address().to_string();
  accept();
  started = true;
  thread = std::thread([s = this] {
    for (;;) {
      try {
        s->io.run();
        return;
      } catch (const std::exception& e) {
        CHORUS_LOG(error, "rendezvous",
                   "store server handler threw: " << e.what() << "; continuing");
      }
    }
  });
  CHORUS_LOG(info, "rendezvous",
             "store listening on " << format_host_port(bound.address().to_string(), bound.port()));
  return bound.port();
}

void kv_server::stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  asio::post(impl_->io, [s = impl_.get()] {
    asio::error_code ignored;
    s->acceptor.close(ignored);
    s->accept_retry.cancel();
    std::vector<std::shared_ptr<session>> all(s->store.sessions.begin(), s->store.sessions.end());
    for (auto& sess : all) sess->close("server stopping");
    // Aborted handlers still queued are destroyed with the io_context, never run.
    s->io.stop();
  });
  impl_->thread.join();
}

uint16_t kv_server::port() const { return impl_->port.load(); }

std::string kv_server::local_connect_host() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->connect_host;
}

}  // namespace chorus
