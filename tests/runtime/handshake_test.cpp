// The connection handshake (runtime/wire/handshake.hpp, runtime/transport/tcp/handshake_io.hpp)
// over a socketpair(AF_UNIX): client and server halves in two threads, raw peers that break the
// protocol on purpose, and the MACs' dependence on every transcript field. Every blocking call
// has a deadline of a few seconds; a correct run takes milliseconds.
#include "runtime/transport/tcp/handshake_io.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <functional>
#include <future>
#include <string>

#include "runtime/wire/handshake.hpp"

namespace chorus::tcp {
namespace {

using namespace std::chrono_literals;

clock::time_point soon() { return clock::now() + 5s; }

struct socket_pair {
  unique_fd client;
  unique_fd server;
};

socket_pair make_socket_pair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  return {unique_fd(sv[0]), unique_fd(sv[1])};
}

handshake_config config(int rank, const std::string& secret, uint64_t job = 0xC0FFEE) {
  return handshake_config{job, secret, rank, 8, 2};
}

using admit_fn = std::function<status(const client_identity&)>;
status admit_all(const client_identity&) { return {}; }

// Runs server_handshake on its own thread; the socket closes when it returns, as the acceptor's does.
std::future<result<client_identity>> serve(unique_fd fd, handshake_config cfg, admit_fn admit = admit_all) {
  return std::async(std::launch::async, [fd = std::move(fd), cfg, admit]() mutable {
    auto r = server_handshake(fd.get(), cfg, soon(), admit);
    fd.reset();
    return r;
  });
}

result<client_identity> finish(std::future<result<client_identity>>& f) {
  if (f.wait_for(10s) != std::future_status::ready) std::abort();  // the deadlines failed: do not hang CI
  return f.get();
}

std::string text_of(const std::vector<std::byte>& b) {
  std::string s;
  for (auto c : b) s.push_back(static_cast<char>(c));
  return s;
}

wire::frame_header header(wire::frame_kind k, uint64_t job) {
  wire::frame_header h;
  h.kind = k;
  h.job_id = job;
  return h;
}

// ---- two real halves --------------------------------------------------------------------------

struct identity_case {
  int client_rank;
  int server_rank;
  int stream;
};

class handshake_accepts : public ::testing::TestWithParam<identity_case> {};

TEST_P(handshake_accepts, same_secret_with_the_clients_identity) {
  auto [client_rank, server_rank, stream] = GetParam();
  auto fds = make_socket_pair();
  client_identity admitted;
  auto server = serve(std::move(fds.server), config(server_rank, "s3cret"), [&](const client_identity& who) {
    admitted = who;
    return status{};
  });
  auto st = client_handshake(fds.client.get(), config(client_rank, "s3cret"), stream, server_rank, soon());
  auto who = finish(server);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE(who.ok()) << who.error().to_string();
  EXPECT_EQ(who->rank, client_rank);
  EXPECT_EQ(who->stream, stream);
  EXPECT_EQ(admitted.rank, client_rank);
  EXPECT_EQ(admitted.stream, stream);
}

INSTANTIATE_TEST_SUITE_P(identities, handshake_accepts,
                         ::testing::Values(identity_case{1, 0, 0}, identity_case{7, 3, 1}, identity_case{5, 4, 63}));

TEST(handshake, client_with_the_wrong_secret_refuses_the_server) {
  auto fds = make_socket_pair();
  auto server = serve(std::move(fds.server), config(0, "right"));
  auto st = client_handshake(fds.client.get(), config(1, "wrong"), 0, 0, soon());
  auto who = finish(server);
  EXPECT_EQ(st.code(), errc::auth);
  EXPECT_NE(st.message().find("server failed to prove the job secret"), std::string::npos) << st.to_string();
  ASSERT_FALSE(who.ok());
  EXPECT_EQ(who.error().code(), errc::auth);
  EXPECT_NE(who.error().message().find("client gave up"), std::string::npos) << who.error().to_string();
}

TEST(handshake, client_refuses_a_server_that_is_not_the_rank_it_dialled) {
  auto fds = make_socket_pair();
  auto server = serve(std::move(fds.server), config(2, "s"));
  auto st = client_handshake(fds.client.get(), config(1, "s"), 0, /*server_rank=*/3, soon());
  auto who = finish(server);
  EXPECT_EQ(st.code(), errc::protocol);
  EXPECT_EQ(st.message(), "expected rank 3 but rank 2 answered");
  EXPECT_FALSE(who.ok());
}

TEST(handshake, admit_refusal_reaches_both_sides_with_its_reason) {
  auto fds = make_socket_pair();
  auto server = serve(std::move(fds.server), config(0, "s"), [](const client_identity& who) {
    return status{errc::config, "stream " + std::to_string(who.stream) + " is beyond CHORUS_NUM_STREAMS=2"};
  });
  auto st = client_handshake(fds.client.get(), config(1, "s"), 5, 0, soon());
  auto who = finish(server);
  ASSERT_FALSE(who.ok());
  EXPECT_EQ(who.error().code(), errc::config);
  EXPECT_EQ(who.error().message(), "stream 5 is beyond CHORUS_NUM_STREAMS=2");
  EXPECT_EQ(st.code(), errc::auth);  // the client sees any refusal as auth, with the reason
  EXPECT_EQ(st.message(), "refused by rank 0: stream 5 is beyond CHORUS_NUM_STREAMS=2");
}

TEST(handshake, wrong_job_id_is_a_protocol_error) {
  auto fds = make_socket_pair();
  auto server = serve(std::move(fds.server), config(0, "s", 0xB));
  auto st = client_handshake(fds.client.get(), config(1, "s", 0xA), 0, 0, soon());
  auto who = finish(server);
  ASSERT_FALSE(who.ok());
  EXPECT_EQ(who.error().code(), errc::protocol);
  EXPECT_EQ(who.error().message(), "frame of job 0xa, expected job 0xb");
  EXPECT_FALSE(st.ok());  // the server hung up without a challenge
}

// ---- raw peers ------------------------------------------------------------------------------

TEST(handshake, raw_client_with_a_wrong_proof_gets_rejected) {
  auto fds = make_socket_pair();
  const auto cfg = config(0, "right");
  auto server = serve(std::move(fds.server), cfg);
  const int fd = fds.client.get();
  const wire::frame_limits limits{cfg.job_id, 4096};

  wire::hello_msg hello{1, 0, wire::random_nonce()};
  ASSERT_TRUE(send_frame(fd, header(wire::frame_kind::hello, cfg.job_id), wire::encode(hello), soon()).ok());
  auto f = recv_frame(fd, limits, soon());
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  ASSERT_EQ(f->header.kind, wire::frame_kind::challenge);
  auto ch = wire::decode_challenge(f->payload);
  ASSERT_TRUE(ch.ok());
  // Ignore the server's MAC; prove with a guess.
  wire::transcript t{cfg.job_id, 1, ch->server_rank, 0, hello.client_nonce, ch->server_nonce};
  wire::proof_msg proof{wire::client_mac("guess", t)};
  ASSERT_TRUE(send_frame(fd, header(wire::frame_kind::proof, cfg.job_id), wire::encode(proof), soon()).ok());

  auto verdict = recv_frame(fd, limits, soon());
  auto who = finish(server);
  ASSERT_FALSE(who.ok());
  EXPECT_EQ(who.error().code(), errc::auth);
  EXPECT_EQ(who.error().message(), "wrong job secret");
  ASSERT_TRUE(verdict.ok()) << verdict.error().to_string();
  EXPECT_EQ(verdict->header.kind, wire::frame_kind::reject);
  EXPECT_EQ(text_of(verdict->payload), "wrong job secret");
}

TEST(handshake, raw_client_that_skips_hello_gets_rejected) {
  auto fds = make_socket_pair();
  const auto cfg = config(0, "s");
  auto server = serve(std::move(fds.server), cfg);
  ASSERT_TRUE(send_frame(fds.client.get(), header(wire::frame_kind::proof, cfg.job_id),
                         wire::encode(wire::proof_msg{}), soon()).ok());
  auto verdict = recv_frame(fds.client.get(), wire::frame_limits{cfg.job_id, 4096}, soon());
  auto who = finish(server);
  ASSERT_FALSE(who.ok());
  EXPECT_EQ(who.error().code(), errc::protocol);
  ASSERT_TRUE(verdict.ok()) << verdict.error().to_string();
  EXPECT_EQ(verdict->header.kind, wire::frame_kind::reject);
  EXPECT_EQ(text_of(verdict->payload), "expected hello");
}

TEST(handshake, raw_server_with_a_forged_challenge_is_refused_by_the_client) {
  auto fds = make_socket_pair();
  const auto cfg = config(1, "right");
  auto client = std::async(std::launch::async, [&] { return client_handshake(fds.client.get(), cfg, 0, 0, soon()); });
  const int fd = fds.server.get();
  const wire::frame_limits limits{cfg.job_id, 4096};
  auto f = recv_frame(fd, limits, soon());
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  auto hello = wire::decode_hello(f->payload);
  ASSERT_TRUE(hello.ok());
  wire::challenge_msg ch{0, wire::random_nonce(), {}};
  ch.server_mac = wire::server_mac(
      "guess", wire::transcript{cfg.job_id, hello->client_rank, 0, hello->stream, hello->client_nonce, ch.server_nonce});
  ASSERT_TRUE(send_frame(fd, header(wire::frame_kind::challenge, cfg.job_id), wire::encode(ch), soon()).ok());
  auto answer = recv_frame(fd, limits, soon());
  ASSERT_EQ(client.wait_for(10s), std::future_status::ready);
  auto st = client.get();
  EXPECT_EQ(st.code(), errc::auth);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->header.kind, wire::frame_kind::reject);  // the client never sends its proof
}

// ---- MACs -------------------------------------------------------------------------------------

wire::transcript base_transcript() {
  wire::transcript t{0x1234, 1, 2, 3, {}, {}};
  for (int i = 0; i < 32; ++i) {
    t.client_nonce[i] = static_cast<uint8_t>(i);
    t.server_nonce[i] = static_cast<uint8_t>(100 + i);
  }
  return t;
}

struct field_change {
  std::string name;
  std::function<void(wire::transcript&)> change;
};

void PrintTo(const field_change& c, std::ostream* os) { *os << c.name; }

class mac_binds : public ::testing::TestWithParam<field_change> {};

TEST_P(mac_binds, every_transcript_field) {
  auto a = base_transcript();
  auto b = a;
  GetParam().change(b);
  EXPECT_NE(wire::server_mac("k", a), wire::server_mac("k", b));
  EXPECT_NE(wire::client_mac("k", a), wire::client_mac("k", b));
  EXPECT_FALSE(wire::mac_equal(wire::client_mac("k", a), wire::client_mac("k", b)));
}

INSTANTIATE_TEST_SUITE_P(
    fields, mac_binds,
    ::testing::Values(field_change{"job_id", [](wire::transcript& t) { t.job_id ^= 1ull << 63; }},
                      field_change{"client_rank", [](wire::transcript& t) { t.client_rank += 1; }},
                      field_change{"server_rank", [](wire::transcript& t) { t.server_rank += 1; }},
                      field_change{"ranks_swapped", [](wire::transcript& t) { std::swap(t.client_rank, t.server_rank); }},
                      field_change{"stream", [](wire::transcript& t) { t.stream += 1; }},
                      field_change{"client_nonce_first", [](wire::transcript& t) { t.client_nonce[0] ^= 1; }},
                      field_change{"client_nonce_last", [](wire::transcript& t) { t.client_nonce[31] ^= 0x80; }},
                      field_change{"server_nonce_first", [](wire::transcript& t) { t.server_nonce[0] ^= 1; }},
                      field_change{"server_nonce_last", [](wire::transcript& t) { t.server_nonce[31] ^= 0x80; }},
                      field_change{"nonces_swapped", [](wire::transcript& t) { std::swap(t.client_nonce, t.server_nonce); }}),
    [](const auto& info) { return info.param.name; });

TEST(handshake_mac, depends_on_secret_and_direction_and_nothing_else) {
  auto t = base_transcript();
  EXPECT_EQ(wire::server_mac("k", t), wire::server_mac("k", t));
  EXPECT_NE(wire::server_mac("k", t), wire::server_mac("K", t));
  EXPECT_NE(wire::server_mac("k", t), wire::server_mac("kk", t));
  // Raw HMAC pads short keys with zeros ("k" and "k\0" would be one key); the derived key keeps
  // them apart.
  EXPECT_NE(wire::server_mac("k", t), wire::server_mac(std::string("k\0", 2), t));
  EXPECT_NE(wire::server_mac("k", t), wire::client_mac("k", t));  // a server MAC is no client proof
  EXPECT_TRUE(wire::mac_equal(wire::client_mac("k", t), wire::client_mac("k", t)));
}

TEST(handshake_mac, nonces_are_fresh) {
  EXPECT_NE(wire::random_nonce(), wire::random_nonce());
}

// ---- message codecs -------------------------------------------------------------------------

TEST(handshake_codec, round_trips) {
  auto t = base_transcript();
  wire::hello_msg h{7, 3, t.client_nonce};
  auto h2 = wire::decode_hello(wire::encode(h));
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(h2->client_rank, 7u);
  EXPECT_EQ(h2->stream, 3u);
  EXPECT_EQ(h2->client_nonce, t.client_nonce);
  wire::challenge_msg c{5, t.server_nonce, wire::server_mac("k", t)};
  auto c2 = wire::decode_challenge(wire::encode(c));
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->server_rank, 5u);
  EXPECT_EQ(c2->server_nonce, t.server_nonce);
  EXPECT_EQ(c2->server_mac, c.server_mac);
  wire::proof_msg p{wire::client_mac("k", t)};
  auto p2 = wire::decode_proof(wire::encode(p));
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->client_mac, p.client_mac);
}

TEST(handshake_codec, wrong_sizes_name_the_message_and_sizes) {
  std::vector<std::byte> short_payload(39);
  auto h = wire::decode_hello(short_payload);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code(), errc::protocol);
  EXPECT_EQ(h.error().message(), "hello payload of 39 bytes, expected 40");
  auto c = wire::decode_challenge(std::vector<std::byte>(69));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "challenge payload of 69 bytes, expected 68");
  auto p = wire::decode_proof({});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message(), "proof payload of 0 bytes, expected 32");
}

}  // namespace
}  // namespace chorus::tcp
