// The store client: Asio on a private io_context, driven by the calling thread with run_until so
// every call ends by its deadline. A timed-out or broken connection is closed; the next call
// connects again.
#include "runtime/rendezvous/kv_client.hpp"

#include <algorithm>
#include <asio.hpp>
#include <optional>
#include <thread>

#include "runtime/core/log.hpp"
#include "runtime/env/process_env.hpp"

namespace chorus {

namespace kv {
std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms >= 1000 && ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}
}  // namespace kv

namespace {
using asio::ip::tcp;
constexpr std::chrono::milliseconds first_backoff{10};
constexpr std::chrono::milliseconds max_backoff{500};
}  // namespace

struct kv_client::impl {
  std::string host;
  uint16_t port = 0;
  kv::credentials creds;
  uint32_t rank = 0;
  asio::io_context io;
  tcp::socket socket{io};
  bool connected = false;

  void disconnect() {
    asio::error_code ignored;
    socket.close(ignored);
    connected = false;
  }

  // Runs one asynchronous operation until it completes or `deadline` passes; on the deadline the
  // socket is closed (cancelling the operation) and the result is timed_out.
  template <class Initiate>
  asio::error_code run(Initiate&& initiate, clock::time_point deadline) {
    std::optional<asio::error_code> done;
    io.restart();
    initiate([&done](asio::error_code ec, auto&&...) { done = ec; });
    io.run_until(deadline);
    if (done) return *done;
    disconnect();
    io.restart();
    io.run();  // the cancelled handler runs now, while `done` still exists
    return asio::error::timed_out;
  }

  status lost(const std::string& address, asio::error_code ec, const char* doing) {
    disconnect();
    if (ec == asio::error::timed_out) {
      return {errc::rendezvous,
              "rendezvous " + address + ": rank 0's store did not answer in time while " + doing};
    }
    return {errc::rendezvous, "rendezvous " + address +
                                  ": lost the connection to rank 0's store while " + doing + ": " +
                                  ec.message()};
  }
  // Reads one frame of at most `limit` bytes into `body`.
  asio::error_code read_frame(std::string& body, uint32_t limit, clock::time_point deadline, bool& too_long) {
    unsigned char header[kv::header_bytes];
    auto ec = run([&](auto handler) { asio::async_read(socket, asio::buffer(header), handler); }, deadline);
    if (ec) return ec;
    uint32_t length = kv::decode_length(header);
    too_long = length == 0 || length > limit;
    if (too_long) return {};
    body.assign(length, '\0');
    return run([&](auto handler) { asio::async_read(socket, asio::buffer(body), handler); }, deadline);
  }

  // The handshake of kv_auth.hpp on a fresh connection.
  status handshake(const std::string& address, clock::time_point deadline) {
    kv::client_handshake hs(creds, rank);
    std::string frame = hs.hello(), body;
    bool too_long = false;
    auto ec = run([&](auto handler) { asio::async_write(socket, asio::buffer(frame), handler); }, deadline);
    if (!ec) ec = read_frame(body, kv::max_handshake_bytes, deadline, too_long);
    if (ec) return lost(address, ec, "proving the job secret");
    if (too_long) {
      disconnect();
      return {errc::protocol, "rendezvous " + address + ": the store's challenge has a bad length"};
    }
    auto proof = hs.answer(body);
    if (!proof) {
      disconnect();
      return {proof.error().code(), "rendezvous " + address + ": " + proof.error().message()};
    }
    ec = run([&](auto handler) { asio::async_write(socket, asio::buffer(*proof), handler); }, deadline);
    if (!ec) ec = read_frame(body, kv::max_frame_bytes, deadline, too_long);
    if (ec) return lost(address, ec, "proving the job secret");
    auto verdict = too_long ? result<kv::reply>(status{errc::protocol, "bad length"}) : kv::decode_reply(body);
    if (!verdict) {
      disconnect();
      return {errc::protocol, "rendezvous " + address + ": the store's verdict: " + verdict.error().message()};
    }
    if (verdict->code != kv::reply_code::ok) {
      disconnect();
      return {errc::auth, "rendezvous " + address + ": rank 0's store " + verdict->message +
                              "; every rank needs the same CHORUS_JOB_SECRET"};
    }
    return {};
  }
};

kv_client::kv_client(std::string host, uint16_t port, kv::credentials creds, uint32_t rank)
    : impl_(std::make_unique<impl>()), address_(format_host_port(host, port)) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->creds = std::move(creds);
  impl_->rank = rank;
}

kv_client::~kv_client() = default;

status kv_client::connect(clock::time_point deadline) {
  auto& s = *impl_;
  s.disconnect();
  auto started = clock::now();
  auto backoff = first_backoff;
  std::string last_error = "the deadline had already passed";
  while (clock::now() < deadline) {
    asio::error_code ec;
    tcp::resolver resolver(s.io);
    auto endpoints = resolver.resolve(s.host, std::to_string(s.port), ec);
    if (ec) last_error = "resolving '" + s.host + "': " + ec.message();
    for (const auto& entry : endpoints) {  // empty when resolving failed
      s.disconnect();
      auto attempt =
          s.run([&](auto handler) { s.socket.async_connect(entry.endpoint(), handler); }, deadline);
      if (!attempt) {
        asio::error_code ignored;
        s.socket.set_option(tcp::no_delay(true), ignored);
        s.socket.set_option(asio::socket_base::keep_alive(true), ignored);
        if (auto st = s.handshake(address_, deadline); !st.ok()) {
          // A refusal is final; a store that went away mid-handshake may be a restarting one.
          if (st.code() != errc::rendezvous) return st;
          last_error = st.message();
          continue;
        }
        s.connected = true;
        CHORUS_LOG(debug, "rendezvous", "connected to store at " << address_);
        return {};
      }
      last_error = attempt.message();
    }
    // Rank 0 may not be listening yet: wait a little, longer each time, never past the deadline.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) break;
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, max_backoff);
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - started);
  return {errc::rendezvous,
          "rendezvous " + address_ + ": could not reach rank 0's store within " +
              kv::format_duration(std::max(waited, std::chrono::milliseconds(0))) +
              " (last error: " + last_error +
              "); check that rank 0 is running and that CHORUS_RENDEZVOUS (or "
              "MASTER_ADDR/MASTER_PORT) names its host"};
}

result<kv::reply> kv_client::call(kv::request r, clock::time_point deadline) {
  auto& s = *impl_;
  if (!s.connected) {
    if (auto st = connect(deadline); !st) return st;
  }
  auto reply_deadline = deadline;
  if (r.kind != kv::op::set) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    r.wait_ms = static_cast<uint32_t>(std::clamp<int64_t>(left, 0, UINT32_MAX));
    reply_deadline = deadline + reply_grace;
  }
  std::string frame = kv::encode_frame(r);
  auto ec = s.run([&](auto handler) { asio::async_write(s.socket, asio::buffer(frame), handler); },
                  reply_deadline);
  if (ec) return s.lost(address_, ec, "sending a request");

  unsigned char header[kv::header_bytes];
  ec = s.run([&](auto handler) { asio::async_read(s.socket, asio::buffer(header), handler); },
             reply_deadline);
  if (ec) return s.lost(address_, ec, "waiting for a reply");
  uint32_t length = kv::decode_length(header);
  if (length == 0 || length > kv::max_frame_bytes) {
    s.disconnect();
    return status{errc::protocol, "rendezvous " + address_ + ": reply frame length " +
                                      std::to_string(length) + " outside 1-" +
                                      std::to_string(kv::max_frame_bytes)};
  }
  std::string body(length, '\0');
  ec = s.run([&](auto handler) { asio::async_read(s.socket, asio::buffer(body), handler); },
             reply_deadline);
  if (ec) return s.lost(address_, ec, "reading a reply");
  auto reply = kv::decode_reply(body);
  if (!reply) {
    s.disconnect();
    return status{errc::protocol, "rendezvous " + address_ + ": " + reply.error().message()};
  }
  return std::move(*reply);
}

}  // namespace chorus
