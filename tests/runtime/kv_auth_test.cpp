// The rendezvous store under hostile clients (kv_auth.hpp, kv_server_limits): nothing is read or
// written before a client proves the job secret; a wrong secret is refused with a message on both
// sides; silent, slow and non-reading clients are bounded and closed without holding up others;
// the store's own size is bounded. Real sockets on 127.0.0.1.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/rendezvous/kv_auth.hpp"
#include "runtime/rendezvous/kv_client.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"
#include "runtime/rendezvous/kv_server.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using asio::ip::tcp;

const kv::credentials good{"the job's secret", 0x1234};
const kv::credentials other_secret{"another secret", 0x1234};
const kv::credentials other_job{"the job's secret", 0x9999};

struct served {
  std::unique_ptr<kv_server> server;
  uint16_t port = 0;
};

served serve(kv_server_limits limits = {}) {
  served s;
  s.server = std::make_unique<kv_server>(good, limits);
  auto port = s.server->start("127.0.0.1", 0);
  EXPECT_TRUE(port.ok());
  s.port = port.ok() ? *port : 0;
  return s;
}

// True when the server closes `fd` within `timeout_ms` (data before the close is skipped).
bool peer_closes(int fd, int timeout_ms) {
  auto until = clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

std::string read_frame(tcp::socket& s) {
  unsigned char header[kv::header_bytes];
  asio::read(s, asio::buffer(header));
  std::string body(kv::decode_length(header), '\0');
  asio::read(s, asio::buffer(body));
  return body;
}

// A raw connection that has passed the handshake with `creds`.
void authenticate(tcp::socket& raw, const kv::credentials& creds) {
  kv::client_handshake hs(creds, 1);
  asio::write(raw, asio::buffer(hs.hello()));
  auto proof = hs.answer(read_frame(raw));
  ASSERT_TRUE(proof.ok()) << proof.error().to_string();
  asio::write(raw, asio::buffer(*proof));
  auto verdict = kv::decode_reply(read_frame(raw));
  ASSERT_TRUE(verdict.ok());
  ASSERT_EQ(verdict->code, kv::reply_code::ok) << verdict->message;
}

result<kv::reply> call(uint16_t port, const kv::credentials& creds, kv::request r, std::chrono::milliseconds within = 2000ms) {
  kv_client c("127.0.0.1", port, creds, 1);
  return c.call(std::move(r), clock::now() + within);
}

TEST(kv_auth, the_right_secret_and_job_reach_the_store) {
  auto s = serve();
  auto set = call(s.port, good, kv::request{kv::op::set, "k", "v", 0, 0});
  ASSERT_TRUE(set.ok()) << set.error().to_string();
  auto got = call(s.port, good, kv::request{kv::op::get, "k", {}, 0, 0});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->values, std::vector<std::string>{"v"});
}

TEST(kv_auth, another_secret_or_job_is_refused_by_the_client_and_touches_nothing) {
  auto s = serve();
  for (const auto& creds : {other_secret, other_job}) {
    auto set = call(s.port, creds, kv::request{kv::op::set, "k", "evil", 0, 0});
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.error().code(), errc::auth) << set.error().to_string();
    EXPECT_NE(set.error().message().find("did not prove the job secret"), std::string::npos) << set.error().to_string();
  }
  auto got = call(s.port, good, kv::request{kv::op::get, "k", {}, 0, 0}, 200ms);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->code, kv::reply_code::timeout) << "a refused client stored something";
}

TEST(kv_auth, a_wrong_proof_gets_the_stores_refusal_then_the_connection_closes) {
  auto s = serve();
  asio::io_context io;
  tcp::socket raw(io);
  raw.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), s.port));
  kv::client_handshake hs(other_secret, 3);
  asio::write(raw, asio::buffer(hs.hello()));
  (void)read_frame(raw);  // the challenge
  asio::write(raw, asio::buffer(kv::handshake_frame(wire::encode(wire::proof_msg{}))));  // a zero MAC
  auto verdict = kv::decode_reply(read_frame(raw));
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(verdict->code, kv::reply_code::bad_request);
  EXPECT_NE(verdict->message.find("rank 3"), std::string::npos) << verdict->message;
  EXPECT_NE(verdict->message.find("does not know the job secret"), std::string::npos) << verdict->message;
  EXPECT_TRUE(peer_closes(raw.native_handle(), 1000));
}

TEST(kv_auth, requests_before_the_handshake_and_oversized_frames_close_the_connection) {
  auto s = serve();
  asio::io_context io;
  const std::vector<std::string> hostile = {
      kv::encode_frame(kv::request{kv::op::set, "k", "unauthenticated", 0, 0}),  // no handshake
      std::string("\x00\x10\x00\x00", 4),                                       // 1 MiB before the handshake
  };
  for (const auto& bytes : hostile) {
    tcp::socket raw(io);
    raw.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), s.port));
    asio::write(raw, asio::buffer(bytes));
    EXPECT_TRUE(peer_closes(raw.native_handle(), 1000));
  }
  {  // After the handshake: a frame longer than any request.
    tcp::socket raw(io);
    raw.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), s.port));
    authenticate(raw, good);
    asio::write(raw, asio::buffer(std::string("\x01\x00\x00\x00", 4)));  // 16 MiB
    EXPECT_TRUE(peer_closes(raw.native_handle(), 1000));
  }
  auto got = call(s.port, good, kv::request{kv::op::get, "k", {}, 0, 0}, 200ms);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->code, kv::reply_code::timeout) << "an unauthenticated request was served";
}

TEST(kv_auth, silent_connections_are_bounded_closed_in_time_and_hold_up_nobody) {
  kv_server_limits limits;
  limits.handshake_timeout = 300ms;
  limits.max_handshaking = 8;
  auto s = serve(limits);
  asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> silent;
  for (int i = 0; i < 20; ++i) {
    silent.push_back(std::make_unique<tcp::socket>(io));
    silent.back()->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), s.port));
  }
  auto start = clock::now();
  auto set = call(s.port, good, kv::request{kv::op::set, "k", "v", 0, 0}, 3000ms);
  ASSERT_TRUE(set.ok()) << set.error().to_string();
  EXPECT_LT(clock::now() - start, 2000ms) << "silent connections held up a real client";
  for (auto& raw : silent) EXPECT_TRUE(peer_closes(raw->native_handle(), 1500)) << "a silent connection stayed open";
}

TEST(kv_auth, a_client_that_never_reads_its_replies_is_closed) {
  kv_server_limits limits;
  limits.write_timeout = 300ms;
  auto s = serve(limits);
  ASSERT_TRUE(call(s.port, good, kv::request{kv::op::set, "big", std::string(kv::max_value_bytes, 'x'), 0, 0}).ok());
  asio::io_context io;
  tcp::socket raw(io);
  raw.open(tcp::v4());
  raw.set_option(asio::socket_base::receive_buffer_size(4096));
  raw.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), s.port));
  authenticate(raw, good);
  for (int i = 0; i < 8; ++i) asio::write(raw, asio::buffer(kv::encode_frame(kv::request{kv::op::get, "big", {}, 0, 0})));
  std::this_thread::sleep_for(1000ms);  // replies pile up unread; the server gives up on them
  EXPECT_TRUE(peer_closes(raw.native_handle(), 3000)) << "a client that never reads kept its connection";
  auto got = call(s.port, good, kv::request{kv::op::get, "big", {}, 0, 0});  // the server still serves others
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->values.at(0).size(), kv::max_value_bytes);
}

TEST(kv_auth, the_store_itself_is_bounded) {
  kv_server_limits limits;
  limits.max_keys = 3;
  limits.max_store_bytes = 64;
  auto s = serve(limits);
  for (const char* k : {"a", "b", "c"}) ASSERT_EQ(call(s.port, good, kv::request{kv::op::set, k, "1", 0, 0})->code, kv::reply_code::ok);
  auto fourth = call(s.port, good, kv::request{kv::op::set, "d", "1", 0, 0});
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ(fourth->code, kv::reply_code::bad_request);
  EXPECT_NE(fourth->message.find("3 keys"), std::string::npos) << fourth->message;
  auto big = call(s.port, good, kv::request{kv::op::set, "a", std::string(100, 'y'), 0, 0});
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->code, kv::reply_code::bad_request);
  EXPECT_NE(big->message.find("above its limit of 64"), std::string::npos) << big->message;
  EXPECT_EQ(call(s.port, good, kv::request{kv::op::set, "a", "22", 0, 0})->code, kv::reply_code::ok)
      << "replacing a value within the limits works";
}

}  // namespace
}  // namespace chorus
