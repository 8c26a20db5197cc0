// One client connection of the store server (kv_server.cpp), and the store its sessions share:
// internal to the server, and touched only on the server's thread.
// A session first runs the handshake (kv_auth.hpp: hello, challenge, proof, one frame at a time,
// within limits.handshake_timeout); then it reads requests continuously (so a vanished client is
// seen at once), serves them one at a time, and parks a GET/GATHER until a SET completes it or its
// wait ends. Frame bodies are read in 64 KiB pieces, so a length alone costs nothing. A malformed
// frame, a failed proof or a reply not taken within limits.write_timeout closes that session with a
// (rate-limited) warning; nothing else is affected.
#pragma once

#include <algorithm>
#include <asio.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/arrival_queue.hpp"
#include "runtime/core/log.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/kv_auth.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"
#include "runtime/rendezvous/kv_server.hpp"

namespace chorus::kv {

using asio::ip::tcp;

constexpr size_t max_queued_requests = 16;
constexpr size_t body_piece = 64 * 1024;
// The largest request a client may send: a SET of the longest key and value.
constexpr uint32_t max_request_bytes = 1 + 4 + 4 + kv::max_key_bytes + 4 + kv::max_value_bytes + 4;
class session;

// Everything the sessions share. Touched only on the server thread.
struct store_state {
  kv::credentials creds;
  kv_server_limits limits;
  std::map<std::string, std::string, std::less<>> values;
  size_t bytes = 0;  // keys and values in `values`
  std::set<std::shared_ptr<session>> sessions;
  size_t handshaking = 0;
  // Sessions in accept order, for evicting the oldest one still in its handshake when a new
  // connection finds every handshake slot taken.
  arrival_queue<session> arrivals;
  // Refusals are logged at most once a second; the rest are counted into the next line.
  std::chrono::steady_clock::time_point last_refusal_log{};
  size_t refusals_unlogged = 0;

  void published(const std::string& key);
  void refused(const std::string& peer, const std::string& why) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_refusal_log < std::chrono::seconds(1)) {
      ++refusals_unlogged;
      return;
    }
    CHORUS_LOG(warn, "rendezvous", "refused a connection from " << peer << ": " << why
                                   << (refusals_unlogged ? " (and " + std::to_string(refusals_unlogged) +
                                                               " more refusals in the last second)"
                                                         : std::string()));
    last_refusal_log = now;
    refusals_unlogged = 0;
  }
};

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, store_state& store)
      : socket_(std::move(socket)),
        store_(store),
        timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()),
        handshake_(store.creds) {
    asio::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ =
        ec ? std::string("unknown peer") : format_host_port(ep.address().to_string(), ep.port());
    ++store_.handshaking;
  }

  // Reads the hello; the client has limits.handshake_timeout to finish the handshake.
  void start() {
    timer_.expires_after(store_.limits.handshake_timeout);
    timer_.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (ec || self->closed_ || self->phase_ == phase::ready) return;
      self->refuse("no handshake within " + std::to_string(self->store_.limits.handshake_timeout.count()) + " ms");
    });
    read_header();
  }

  // Ends the connection and whatever it had parked. `why` is logged at debug level when set.
  void close(const std::string& why) {
    if (closed_) return;
    closed_ = true;
    if (!why.empty())
      CHORUS_LOG(debug, "rendezvous", "connection from " << peer_ << " closed: " << why);
    if (phase_ != phase::ready) --store_.handshaking;
    phase_ = phase::ready;  // counted once
    asio::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
    write_timer_.cancel();
    parked_.reset();
    queue_.clear();
    store_.sessions.erase(shared_from_this());
  }

  bool in_handshake() const { return !closed_ && phase_ != phase::ready; }
  std::chrono::steady_clock::time_point accepted_at() const { return accepted_at_; }
  // Closes a connection still in its handshake to make room (kv_server::impl::evict_oldest).
  void evict(const std::string& why) { refuse(why); }

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
  enum class phase { hello, proof, ready };
  std::chrono::steady_clock::time_point accepted_at_ = std::chrono::steady_clock::now();

  void read_header() {
    asio::async_read(
        socket_, asio::buffer(header_), [self = shared_from_this()](asio::error_code ec, size_t) {
          if (self->closed_) return;
          if (ec) return self->close(ec == asio::error::eof ? "client done" : ec.message());
          uint32_t length = kv::decode_length(self->header_);
          const uint32_t limit = self->phase_ == phase::ready ? max_request_bytes : kv::max_handshake_bytes;
          if (length == 0 || length > limit) {
            return self->malformed("frame length " + std::to_string(length) + " outside 1-" + std::to_string(limit) +
                                   (self->phase_ == phase::ready ? "" : " (handshake)"));
          }
          self->body_.clear();
          self->read_body(length);
        });
  }

  // Appends the next piece of a body of `left` more bytes; the whole body goes to on_body().
  void read_body(size_t left) {
    const size_t at = body_.size(), n = std::min(left, body_piece);
    body_.resize(at + n);
    asio::async_read(socket_, asio::buffer(body_.data() + at, n),
                     [self = shared_from_this(), left, n](asio::error_code ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->close(ec.message());
                       if (left > n) return self->read_body(left - n);
                       self->on_body();
                     });
  }

  void on_body() {
    switch (phase_) {
      case phase::hello: {
        auto challenge = handshake_.on_hello(body_);
        if (!challenge) return refuse(challenge.error().message());
        phase_ = phase::proof;
        // One frame at a time until authenticated: the next read starts after this write.
        return write(std::move(*challenge), [](session& s) { s.read_header(); });
      }
      case phase::proof: {
        auto st = handshake_.check(body_);
        if (!st.ok()) {
          store_.refused(peer_, st.message());
          phase_ = phase::ready;  // leaves the handshaking count; closes after the reply
          --store_.handshaking;
          return write(kv::encode_frame(kv::reply{kv::reply_code::bad_request, "refused: " + st.message(), {}, {}}),
                       [](session& s) { s.close(""); });
        }
        phase_ = phase::ready;
        --store_.handshaking;
        timer_.cancel();
        CHORUS_LOG(debug, "rendezvous", "client " << peer_ << " (rank " << handshake_.client_rank() << ") authenticated");
        return write(kv::encode_frame(kv::reply{}), [](session& s) { s.read_header(); });
      }
      case phase::ready: {
        auto req = kv::decode_request(body_);
        if (!req) return malformed(req.error().message());
        if (queue_.size() >= max_queued_requests) {
          return malformed("more than " + std::to_string(max_queued_requests) +
                           " requests sent without reading the replies");
        }
        queue_.push_back(std::move(*req));
        pump();
        if (!closed_) read_header();
        return;
      }
    }
  }

  // A connection that failed the handshake: counted in the rate-limited warning, then closed.
  void refuse(const std::string& why) {
    store_.refused(peer_, why);
    close("");
  }

  // Writes `frame`; `then` runs when it is written. A client that has not taken it within
  // limits.write_timeout is closed (it cannot pin the reply's memory).
  template <class Then>
  void write(std::string frame, Then then) {
    out_ = std::move(frame);
    uint64_t generation = ++write_generation_;
    write_timer_.expires_after(store_.limits.write_timeout);
    write_timer_.async_wait([self = shared_from_this(), generation](asio::error_code ec) {
      if (ec || self->closed_ || generation != self->write_generation_) return;
      CHORUS_LOG(warn, "rendezvous", "closing connection from " << self->peer_ << ": it did not read a reply of "
                                     << self->out_.size() << " bytes within "
                                     << self->store_.limits.write_timeout.count() << " ms");
      self->close("");
    });
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this(), then, generation](asio::error_code ec, size_t) {
                        if (self->closed_) return;
                        if (ec) return self->close(ec.message());
                        if (generation == self->write_generation_) {
                          ++self->write_generation_;
                          self->write_timer_.cancel();
                        }
                        then(*self);
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
        auto it = store_.values.find(r.key);
        const size_t old_bytes = it == store_.values.end() ? 0 : r.key.size() + it->second.size();
        const size_t new_bytes = store_.bytes - old_bytes + r.key.size() + r.value.size();
        if (it == store_.values.end() && store_.values.size() >= store_.limits.max_keys)
          return send(kv::reply{kv::reply_code::bad_request,
                                "set '" + r.key + "': the store holds its limit of " +
                                    std::to_string(store_.limits.max_keys) + " keys", {}, {}});
        if (new_bytes > store_.limits.max_store_bytes)
          return send(kv::reply{kv::reply_code::bad_request,
                                "set '" + r.key + "': the store would hold " + std::to_string(new_bytes) +
                                    " bytes, above its limit of " + std::to_string(store_.limits.max_store_bytes),
                                {}, {}});
        store_.bytes = new_bytes;
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
    write(kv::encode_frame(r), [](session& s) {
      s.busy_ = false;
      s.pump();
    });
  }

  tcp::socket socket_;
  store_state& store_;
  asio::steady_timer timer_;        // the handshake's deadline, then a parked request's wait
  asio::steady_timer write_timer_;  // the reply being written
  uint64_t write_generation_ = 0;   // tells a stale write timer from the current one
  kv::server_handshake handshake_;
  phase phase_ = phase::hello;
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

inline void store_state::published(const std::string& key) {
  // Copy: completing a session never erases it synchronously, but stay safe against it.
  std::vector<std::shared_ptr<session>> all(sessions.begin(), sessions.end());
  for (auto& s : all) s->on_published(key);
}

}  // namespace chorus::kv
