// The store server: an Asio acceptor and one session per client connection, all on one thread,
// so the store needs no lock. Sessions read requests continuously (so a vanished client is seen
// at once), serve them one at a time, and park a GET/GATHER until a SET completes it or its wait
// ends. A malformed frame closes that session with a warning; nothing else is affected.
#include "runtime/rendezvous/kv_server.hpp"

#include <asio.hpp>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "runtime/core/log.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"

namespace chorus {
namespace {

using asio::ip::tcp;

constexpr size_t max_queued_requests = 16;
class session;

// Everything the sessions share. Touched only on the server thread.
struct store_state {
  std::map<std::string, std::string, std::less<>> values;
  std::set<std::shared_ptr<session>> sessions;
  void published(const std::string& key);
};

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, store_state& store)
      : socket_(std::move(socket)), store_(store), timer_(socket_.get_executor()) {
    asio::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ =
        ec ? std::string("unknown peer") : format_host_port(ep.address().to_string(), ep.port());
  }

  void start() { read_header(); }

  // Ends the connection and whatever it had parked. `why` is logged at debug level when set.
  void close(const std::string& why) {
    if (closed_) return;
    closed_ = true;
    if (!why.empty())
      CHORUS_LOG(debug, "rendezvous", "connection from " << peer_ << " closed: " << why);
    asio::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
    parked_.reset();
    queue_.clear();
    store_.sessions.erase(shared_from_this());
  }

  // A SET stored `key`: completes this session's parked request if that was its last key.
  void on_published(const std::string& key) {
    if (closed_ || !parked_) return;
    if (parked_->kind == kv::op::get) {
      if (key == parked_->key) finish_parked(kv::reply_code::ok);
      return;
    }
    uint32_t index = 0;
    if (!kv::parse_indexed_key(key, parked_->key, index) || index >= parked_->count || seen_[index])
      return;
    seen_[index] = true;
    if (--still_missing_ == 0) finish_parked(kv::reply_code::ok);
  }

 private:
  void read_header() {
    asio::async_read(
        socket_, asio::buffer(header_), [self = shared_from_this()](asio::error_code ec, size_t) {
          if (self->closed_) return;
          if (ec) return self->close(ec == asio::error::eof ? "client done" : ec.message());
          uint32_t length = kv::decode_length(self->header_);
          if (length == 0 || length > kv::max_frame_bytes) {
            return self->malformed("frame length " + std::to_string(length) + " outside 1-" +
                                   std::to_string(kv::max_frame_bytes));
          }
          self->read_body(length);
        });
  }

  void read_body(uint32_t length) {
    body_.resize(length);
    asio::async_read(socket_, asio::buffer(body_),
                     [self = shared_from_this()](asio::error_code ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->close(ec.message());
                       auto req = kv::decode_request(self->body_);
                       if (!req) return self->malformed(req.error().message());
                       if (self->queue_.size() >= max_queued_requests) {
                         return self->malformed("more than " + std::to_string(max_queued_requests) +
                                                " requests sent without reading the replies");
                       }
                       self->queue_.push_back(std::move(*req));
                       self->pump();
                       if (!self->closed_) self->read_header();
                     });
  }

  void malformed(const std::string& why) {
    CHORUS_LOG(warn, "rendezvous",
               "closing connection from " << peer_ << ": malformed request: " << why);
    close("");
  }

  void pump() {
    while (!busy_ && !closed_ && !queue_.empty()) {
      kv::request r = std::move(queue_.front());
      queue_.pop_front();
      serve(std::move(r));
    }
  }

  void serve(kv::request r) {
    switch (r.kind) {
      case kv::op::set: {
        CHORUS_LOG(trace, "rendezvous",
                   "set key=" << r.key << " bytes=" << r.value.size() << " from=" << peer_);
        store_.values.insert_or_assign(r.key, std::move(r.value));
        send(kv::reply{});
        store_.published(r.key);
        return;
      }
      case kv::op::get: {
        auto it = store_.values.find(r.key);
        if (it != store_.values.end())
          return send(kv::reply{kv::reply_code::ok, {}, {it->second}, {}});
        return park(std::move(r));
      }
      case kv::op::gather: {
        seen_.assign(r.count, false);
        still_missing_ = r.count;
        for (uint32_t i = 0; i < r.count; ++i) {
          if (store_.values.count(kv::indexed_key(r.key, i))) {
            seen_[i] = true;
            --still_missing_;
          }
        }
        if (still_missing_ == 0) return send(gathered(r));
        return park(std::move(r));
      }
    }
  }

  kv::reply gathered(const kv::request& r) const {
    kv::reply out;
    size_t bytes = 64 + r.count * 4;
    out.values.reserve(r.count);
    for (uint32_t i = 0; i < r.count; ++i) {
      const std::string& v = store_.values.at(kv::indexed_key(r.key, i));
      bytes += 4 + v.size();
      out.values.push_back(v);
    }
    if (bytes > kv::max_frame_bytes) {
      return kv::reply{kv::reply_code::bad_request,
                       "gather '" + r.key + "' of " + std::to_string(r.count) + " values needs " +
                           std::to_string(bytes) + " bytes, above the frame limit " +
                           std::to_string(kv::max_frame_bytes),
                       {},
                       {}};
    }
    return out;
  }

  void park(kv::request r) {
    busy_ = true;
    uint64_t generation = ++park_generation_;
    timer_.expires_after(std::chrono::milliseconds(r.wait_ms));
    parked_ = std::move(r);
    timer_.async_wait([self = shared_from_this(), generation](asio::error_code ec) {
      // A cancelled wait, or one that fired after its request completed, does nothing.
      if (ec || self->closed_ || !self->parked_ || generation != self->park_generation_) return;
      self->finish_parked(kv::reply_code::timeout);
    });
  }

  void finish_parked(kv::reply_code code) {
    kv::request r = std::move(*parked_);
    parked_.reset();
    ++park_generation_;
    timer_.cancel();
    kv::reply out;
    if (code == kv::reply_code::ok && r.kind == kv::op::get) {
      out.values.push_back(store_.values.at(r.key));
    } else if (code == kv::reply_code::ok) {
      out = gathered(r);
    } else {
      out.code = kv::reply_code::timeout;
      for (uint32_t i = 0; r.kind == kv::op::gather && i < r.count; ++i) {
        if (!seen_[i]) out.missing.push_back(i);
      }
    }
    send(std::move(out));
  }

  void send(kv::reply r) {
    busy_ = true;
    out_ = kv::encode_frame(r);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](asio::error_code ec, size_t) {
                        if (self->closed_) return;
                        if (ec) return self->close(ec.message());
                        self->busy_ = false;
                        self->pump();
                      });
  }

  tcp::socket socket_;
  store_state& store_;
  asio::steady_timer timer_;
  std::string peer_;
  unsigned char header_[kv::header_bytes]{};
  std::string body_;
  std::deque<kv::request> queue_;
  std::optional<kv::request> parked_;  // the GET/GATHER waiting for keys, if any
  uint64_t park_generation_ = 0;       // tells a stale timer from the current wait
  std::vector<bool> seen_;             // parked gather: which indices exist
  uint32_t still_missing_ = 0;
  std::string out_;    // the reply being written
  bool busy_ = false;  // a request is parked or its reply is being written
  bool closed_ = false;
};

void store_state::published(const std::string& key) {
  // Copy: completing a session never erases it synchronously, but stay safe against it.
  std::vector<std::shared_ptr<session>> all(sessions.begin(), sessions.end());
  for (auto& s : all) s->on_published(key);
}

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
      socket.set_option(tcp::no_delay(true), ignored);
      auto s = std::make_shared<session>(std::move(socket), store);
      store.sessions.insert(s);
      s->start();
      accept();
    });
  }

  // Tries each candidate address until one binds. Returns the system's last complaint.
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

kv_server::kv_server() : impl_(std::make_unique<impl>()) {}

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

  asio::error_code ec;
  auto bound = impl_->acceptor.local_endpoint(ec);
  if (ec)
    return status{errc::rendezvous,
                  "cannot read the bound address of " + shown + ": " + ec.message()};
  impl_->port = bound.port();
  impl_->connect_host =
      bound.address().is_unspecified()
          ? std::string("127.0.0.1")  // dual-stack :: and 0.0.0.0 both take IPv4 loopback
          : bound.address().to_string();
  impl_->accept();
  impl_->started = true;
  impl_->thread = std::thread([s = impl_.get()] {
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
