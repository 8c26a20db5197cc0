// The rendezvous store on 127.0.0.1: its wire format, the server with several clients in threads
// (ranks starting in random order, waits, timeouts naming missing ranks, unreachable stores) and
// the server surviving malformed requests. Every wait here is bounded well under 2 s.
#include "runtime/rendezvous/rendezvous.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <cstdlib>
#include <future>
#include <latch>
#include <random>
#include <thread>

#include "runtime/rendezvous/kv_client.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"
#include "runtime/rendezvous/kv_server.hpp"
#include "runtime/wire/handshake.hpp"
#include "tests/support/rendezvous_env.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

std::string msg_of(const status& st) { return st.to_string(); }

long long ms_since(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t).count();
}

// Waits up to `timeout` for the peer to close `fd`: true when it did (EOF or reset).
bool peer_closes(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return false;
  char buf[64];
  return ::recv(fd, buf, sizeof buf, 0) <= 0;
}

// --- wire format -----------------------------------------------------------------------------

TEST(KvProtocol, RequestAndReplyRoundTrip) {
  kv::request req{kv::op::gather, "ep/", {}, 7, 1234};
  std::string frame = kv::encode_frame(req);
  unsigned char header[kv::header_bytes];
  std::copy_n(frame.begin(), kv::header_bytes, header);
  ASSERT_EQ(kv::decode_length(header), frame.size() - kv::header_bytes);
  auto back = kv::decode_request(std::string_view(frame).substr(kv::header_bytes));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->kind, kv::op::gather);
  EXPECT_EQ(back->key, "ep/");
  EXPECT_EQ(back->count, 7u);
  EXPECT_EQ(back->wait_ms, 1234u);

  kv::reply rep{kv::reply_code::timeout, "", {"a", std::string("\0b", 2)}, {2, 3}};
  frame = kv::encode_frame(rep);
  auto rback = kv::decode_reply(std::string_view(frame).substr(kv::header_bytes));
  ASSERT_TRUE(rback.ok()) << rback.error().to_string();
  EXPECT_EQ(rback->code, kv::reply_code::timeout);
  EXPECT_EQ(rback->values, rep.values);
  EXPECT_EQ(rback->missing, rep.missing);
}

TEST(KvProtocol, DecodeRejectsEveryTruncationAndTrailingBytes) {
  std::string body =
      kv::encode_frame(kv::request{kv::op::set, "key", "value", 0, 0}).substr(kv::header_bytes);
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = kv::decode_request(std::string_view(body).substr(0, n));
    ASSERT_FALSE(r.ok()) << "accepted a body cut to " << n << " bytes";
    EXPECT_EQ(r.error().code(), errc::protocol);
  }
  EXPECT_FALSE(kv::decode_request(body + "x").ok());
  EXPECT_FALSE(kv::decode_request(std::string("\x09", 1)).ok());  // unknown op
}

TEST(KvProtocol, IndexedKeysAreCanonicalDecimals) {
  uint32_t i = 0;
  EXPECT_TRUE(kv::parse_indexed_key("ep/12", "ep/", i));
  EXPECT_EQ(i, 12u);
  EXPECT_TRUE(kv::parse_indexed_key("ep/0", "ep/", i));
  EXPECT_EQ(i, 0u);
  EXPECT_FALSE(kv::parse_indexed_key("ep/01", "ep/", i));
  EXPECT_FALSE(kv::parse_indexed_key("ep/", "ep/", i));
  EXPECT_FALSE(kv::parse_indexed_key("ep/1x", "ep/", i));
  EXPECT_FALSE(kv::parse_indexed_key("xp/1", "ep/", i));
}

TEST(Rendezvous, RankListsAreCompact) {
  EXPECT_EQ(format_rank_list({2, 3}), "2,3");
  EXPECT_EQ(format_rank_list({0, 1, 2, 3, 4, 5, 9}), "0-5,9");
  EXPECT_EQ(format_rank_list({1, 3, 5, 7}, 2), "1,3,... (4 in all)");
}

// --- server and clients ----------------------------------------------------------------------

TEST(Rendezvous, FourRanksStartingInRandomOrderGatherEveryEndpoint) {
  unsigned seed = std::random_device{}();
  if (const char* s = std::getenv("CHORUS_TEST_SEED"))
    seed = static_cast<unsigned>(std::strtoul(s, nullptr, 10));
  std::printf("seed=%u (rerun with CHORUS_TEST_SEED=%u)\n", seed, seed);
  std::mt19937 rng(seed);
  constexpr int size = 4;
  std::vector<int> delay_ms(size);
  for (auto& d : delay_ms) d = std::uniform_int_distribution<int>(0, 150)(rng);

  uint16_t port = testing::free_rendezvous_port();
  std::vector<std::string> expected;
  for (int r = 0; r < size; ++r)
    expected.push_back("tcp://10.0.0." + std::to_string(r) + ":" + std::to_string(4000 + r));

  std::latch all_gathered(size);  // rank 0 keeps serving until every rank has read
  std::vector<std::future<result<std::vector<std::string>>>> results;
  for (int r = 0; r < size; ++r) {
    results.push_back(std::async(std::launch::async, [&, r]() -> result<std::vector<std::string>> {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms[r]));
      auto rdv = rendezvous::open(testing::rendezvous_env(r, size, port));
      if (!rdv) {
        all_gathered.count_down();
        return rdv.error();
      }
      auto published = (*rdv)->publish("ep/" + std::to_string(r), expected[r]);
      if (!published) {
        all_gathered.count_down();
        return published;
      }
      auto got = (*rdv)->gather("ep/", 1500ms);
      all_gathered.arrive_and_wait();
      return got;
    }));
  }
  for (int r = 0; r < size; ++r) {
    auto got = results[r].get();
    ASSERT_TRUE(got.ok()) << "rank " << r << " (delay " << delay_ms[r]
                          << " ms): " << msg_of(got.error());
    EXPECT_EQ(*got, expected) << "rank " << r;
  }
}

TEST(Rendezvous, GetWaitsForALaterPublish) {
  uint16_t port = testing::free_rendezvous_port();
  auto rank0 = rendezvous::open(testing::rendezvous_env(0, 2, port));
  ASSERT_TRUE(rank0.ok()) << msg_of(rank0.error());
  auto rank1 = rendezvous::open(testing::rendezvous_env(1, 2, port));
  ASSERT_TRUE(rank1.ok()) << msg_of(rank1.error());

  std::atomic<bool> returned{false};
  auto waiter = std::async(std::launch::async, [&] {
    auto v = (*rank1)->get("late", 1500ms);
    returned = true;
    return v;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(returned.load()) << "get returned before the key was published";
  auto start = clock::now();
  ASSERT_TRUE((*rank0)->publish("late", "here").ok());
  auto v = waiter.get();
  ASSERT_TRUE(v.ok()) << msg_of(v.error());
  EXPECT_EQ(*v, "here");
  EXPECT_LT(ms_since(start), 500) << "the parked get was not woken by the publish";
}

TEST(Rendezvous, GetTimeoutNamesTheKey) {
  auto rdv = rendezvous::open(testing::rendezvous_env(0, 1, 0));
  ASSERT_TRUE(rdv.ok()) << msg_of(rdv.error());
  auto start = clock::now();
  auto v = (*rdv)->get("never", 200ms);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code(), errc::rendezvous);
  EXPECT_NE(v.error().message().find("'never'"), std::string::npos) << msg_of(v.error());
  EXPECT_NE(v.error().message().find("200 ms"), std::string::npos) << msg_of(v.error());
  EXPECT_GE(ms_since(start), 190);
  EXPECT_LT(ms_since(start), 1000);
}

TEST(Rendezvous, GatherTimeoutNamesTheMissingRanks) {
  uint16_t port = testing::free_rendezvous_port();
  auto rank0 = rendezvous::open(testing::rendezvous_env(0, 4, port));
  ASSERT_TRUE(rank0.ok()) << msg_of(rank0.error());
  auto rank1 = rendezvous::open(testing::rendezvous_env(1, 4, port));
  ASSERT_TRUE(rank1.ok()) << msg_of(rank1.error());
  ASSERT_TRUE((*rank0)->publish("ep/0", "a").ok());
  ASSERT_TRUE((*rank1)->publish("ep/1", "b").ok());
  ASSERT_TRUE((*rank1)->publish("ep/02", "not rank 2").ok());  // not a canonical index

  auto start = clock::now();
  auto got = (*rank0)->gather("ep/", 300ms);
  auto took = ms_since(start);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), errc::rendezvous);
  EXPECT_EQ(got.error().message(), "rendezvous 127.0.0.1:" + std::to_string(port) +
                                       ": ranks 2,3 of 4 never published 'ep/' within 300 ms");
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 1200);
}

TEST(Rendezvous, ClientToAClosedPortFailsByItsDeadline) {
  uint16_t port = testing::free_rendezvous_port();  // nobody listens there now
  auto start = clock::now();
  auto rdv = rendezvous::open(testing::rendezvous_env(1, 2, port, 300ms));
  auto took = ms_since(start);
  ASSERT_FALSE(rdv.ok());
  EXPECT_EQ(rdv.error().code(), errc::rendezvous);
  EXPECT_NE(rdv.error().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << msg_of(rdv.error());
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 1000);
}

TEST(Rendezvous, MalformedRequestsCloseOnlyThatConnection) {
  uint16_t port = testing::free_rendezvous_port();
  auto rank0 = rendezvous::open(testing::rendezvous_env(0, 2, port));
  ASSERT_TRUE(rank0.ok()) << msg_of(rank0.error());

  const std::vector<std::string> garbage = {
      std::string("\xff\xff\xff\xff", 4),          // length above the limit
      std::string("\x00\x00\x00\x00", 4),          // empty frame
      std::string("\x00\x00\x00\x02\x09\x00", 6),  // unknown op
      std::string("\x00\x00\x00\x09\x02\x00\x00\x00\x00\x00\x00\x10\x00",
                  13),  // key runs past the frame
  };
  asio::io_context io;
  for (const auto& bytes : garbage) {
    asio::ip::tcp::socket raw(io);
    raw.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    asio::write(raw, asio::buffer(bytes));
    EXPECT_TRUE(peer_closes(raw.native_handle(), 1000))
        << "server kept a connection that sent garbage";
  }
  {  // A client that vanishes mid-frame.
    asio::ip::tcp::socket raw(io);
    raw.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    asio::write(raw, asio::buffer(std::string("\x00\x00\x00\x40\x01", 5)));
  }

  auto rank1 = rendezvous::open(testing::rendezvous_env(1, 2, port));
  ASSERT_TRUE(rank1.ok()) << msg_of(rank1.error());
  ASSERT_TRUE((*rank1)->publish("ep/1", "one").ok());
  ASSERT_TRUE((*rank0)->publish("ep/0", "zero").ok());
  auto got = (*rank0)->gather("ep/", 1000ms);
  ASSERT_TRUE(got.ok()) << msg_of(got.error());
  EXPECT_EQ(*got, (std::vector<std::string>{"zero", "one"}));
}

TEST(Rendezvous, SingleRankPicksAPortAndRepublishingReplaces) {
  auto rdv = rendezvous::open(testing::rendezvous_env(0, 1, 0));
  ASSERT_TRUE(rdv.ok()) << msg_of(rdv.error());
  EXPECT_NE((*rdv)->address(), "127.0.0.1:0");
  ASSERT_TRUE((*rdv)->publish("ep/0", "old").ok());
  ASSERT_TRUE((*rdv)->publish("ep/0", "new").ok());
  auto got = (*rdv)->gather("ep/", 500ms);
  ASSERT_TRUE(got.ok()) << msg_of(got.error());
  EXPECT_EQ(*got, std::vector<std::string>{"new"});
}

TEST(Rendezvous, BadArgumentsAreRejectedAtTheBoundary) {
  auto multi = rendezvous::open(testing::rendezvous_env(1, 2, 0));
  ASSERT_FALSE(multi.ok());
  EXPECT_EQ(multi.error().code(), errc::config);
  EXPECT_NE(multi.error().message().find("port 0"), std::string::npos) << msg_of(multi.error());

  auto rdv = rendezvous::open(testing::rendezvous_env(0, 1, 0));
  ASSERT_TRUE(rdv.ok()) << msg_of(rdv.error());
  EXPECT_EQ((*rdv)->publish("", "x").code(), errc::invalid_argument);
  EXPECT_EQ((*rdv)->publish("k", std::string(kv::max_value_bytes + 1, 'x')).code(),
            errc::invalid_argument);
  EXPECT_FALSE((*rdv)->gather("", 10ms).ok());
}

TEST(Rendezvous, AWaitingRankLearnsPromptlyWhenRankZeroGoesAway) {
  uint16_t port = testing::free_rendezvous_port();
  auto rank0 = rendezvous::open(testing::rendezvous_env(0, 2, port));
  ASSERT_TRUE(rank0.ok()) << msg_of(rank0.error());
  auto rank1 = rendezvous::open(testing::rendezvous_env(1, 2, port));
  ASSERT_TRUE(rank1.ok()) << msg_of(rank1.error());

  auto waiter = std::async(std::launch::async, [&] { return (*rank1)->gather("ep/", 1500ms); });
  std::this_thread::sleep_for(50ms);
  auto start = clock::now();
  rank0->reset();  // rank 0's store stops with rank 1's gather parked in it
  auto got = waiter.get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), errc::rendezvous);
  EXPECT_NE(got.error().message().find("lost the connection"), std::string::npos)
      << msg_of(got.error());
  EXPECT_LT(ms_since(start), 500);
}

TEST(Rendezvous, RankZeroCannotServeOnAPortInUse) {
  asio::io_context io;
  asio::ip::tcp::acceptor taken(io,
                                asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  uint16_t port = taken.local_endpoint().port();
  auto rdv = rendezvous::open(testing::rendezvous_env(0, 2, port, 300ms));
  ASSERT_FALSE(rdv.ok());
  EXPECT_EQ(rdv.error().code(), errc::rendezvous);
  EXPECT_NE(rdv.error().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << msg_of(rdv.error());
}

}  // namespace
}  // namespace chorus

namespace chorus {
namespace {

// A rank refused for its secret may try again in the same process: the failed attempt does not
// count as a round (the store's round number would never match again otherwise).
TEST(Rendezvous, ARankRefusedForItsSecretCanTryAgain) {
  uint16_t port = testing::free_rendezvous_port();
  auto rank0 = rendezvous::open(testing::rendezvous_env(0, 2, port));
  ASSERT_TRUE(rank0.ok()) << msg_of(rank0.error());
  auto wrong = testing::rendezvous_env(1, 2, port);
  wrong.job_secret = "not the job's secret";
  auto refused = rendezvous::open(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), errc::auth) << msg_of(refused.error());
  auto rank1 = rendezvous::open(testing::rendezvous_env(1, 2, port));
  ASSERT_TRUE(rank1.ok()) << msg_of(rank1.error());
  ASSERT_TRUE((*rank1)->publish("ep/1", "one").ok());
  ASSERT_TRUE((*rank0)->publish("ep/0", "zero").ok());
  auto got = (*rank1)->gather("ep/", 1000ms);
  ASSERT_TRUE(got.ok()) << msg_of(got.error());
  EXPECT_EQ(*got, (std::vector<std::string>{"zero", "one"}));
}

// Every rank of a round gets the same session id; the next round (a restarted job with the same
// secret and job id) gets another, so a rank of the last attempt cannot join it.
TEST(Rendezvous, EachRoundHasItsOwnSessionIdSharedByItsRanks) {
  uint16_t port = testing::free_rendezvous_port();
  std::vector<uint64_t> ids;
  for (int round = 0; round < 2; ++round) {
    auto rank1 = std::async(std::launch::async, [&] { return rendezvous::open(testing::rendezvous_env(1, 2, port)); });
    auto rank0 = rendezvous::open(testing::rendezvous_env(0, 2, port));
    auto r1 = rank1.get();
    ASSERT_TRUE(rank0.ok()) << msg_of(rank0.error());
    ASSERT_TRUE(r1.ok()) << msg_of(r1.error());
    EXPECT_NE((*rank0)->session_id(), 0u);
    EXPECT_EQ((*rank0)->session_id(), (*r1)->session_id());
    ids.push_back((*rank0)->session_id());
    // Both leave before the next round (rank 0 last: its store serves rank 1's last reply).
    r1->reset();
    rank0->reset();
  }
  EXPECT_NE(ids[0], ids[1]);
  wire::nonce n{};
  EXPECT_NE(wire::session_id("a", 1, n), wire::session_id("b", 1, n)) << "the secret goes into the id";
  EXPECT_NE(wire::session_id("a", 1, n), wire::session_id("a", 2, n)) << "the job id goes into the id";
}

}  // namespace
}  // namespace chorus
