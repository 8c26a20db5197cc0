// The control link (runtime/transport/tcp/control_link.hpp) over real TCP connections on
// 127.0.0.1: messages both ways in order, a message far larger than the socket buffers (the
// backlog path; send never blocks), the goodbye exchange, and a peer that dies or sends a bad
// frame. Every wait has a deadline of seconds; a correct run takes milliseconds.
#include "runtime/transport/tcp/control_link.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace chorus::tcp {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t job = 0xC0FFEE;

wire::frame_limits limits() { return {job, 64u << 20}; }

/// Two ends of one TCP connection on 127.0.0.1.
std::pair<unique_fd, unique_fd> tcp_pair() {
  uint16_t port = 0;
  auto listener = listen_on("127.0.0.1", 0, &port);
  if (!listener) std::abort();
  auto client = connect_to({"127.0.0.1", port}, clock::now() + 5s);
  if (!client) std::abort();
  unique_fd server(::accept(listener->get(), nullptr, nullptr));
  if (server.get() < 0) std::abort();
  tune_socket(client->get(), 0);
  tune_socket(server.get(), 0);
  return {std::move(*client), std::move(server)};
}

/// What one link's handlers saw.
struct inbox {
  struct message {
    int peer;
    uint8_t kind;
    int32_t origin;
    std::vector<uint8_t> data;
  };
  struct closed {
    int peer;
    status why;
    bool clean;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<message> messages;
  std::vector<closed> closes;

  control_link::handlers handlers() {
    control_link::handlers h;
    h.on_message = [this](int peer, uint8_t kind, int32_t origin, std::vector<uint8_t> data) {
      std::lock_guard lk(mu);
      messages.push_back({peer, kind, origin, std::move(data)});
      cv.notify_all();
    };
    h.on_closed = [this](int peer, const status& why, bool clean) {
      std::lock_guard lk(mu);
      closes.push_back({peer, why, clean});
      cv.notify_all();
    };
    return h;
  }
  bool wait_messages(std::size_t n) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, 10s, [&] { return messages.size() >= n; });
  }
  bool wait_closed() {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, 10s, [&] { return !closes.empty(); });
  }
};

/// Rank 0 and rank 1 of a two-rank job, each with a link to the other.
struct two_links {
  // The inboxes outlive the links: a link's thread may call its handlers until the link is
  // destroyed (rank 1's goodbye reaches rank 0 while rank 0 is still open).
  inbox in_a, in_b;
  std::unique_ptr<control_link> a, b;  // rank 0, rank 1
  explicit two_links(std::chrono::milliseconds peer_timeout = {}) {
    auto [x, y] = tcp_pair();
    std::vector<unique_fd> fa(2), fb(2);
    fa[1] = std::move(x);
    fb[0] = std::move(y);
    a = std::make_unique<control_link>(0, std::move(fa), limits(), peer_timeout);
    b = std::make_unique<control_link>(1, std::move(fb), limits(), peer_timeout);
  }
};

std::vector<uint8_t> bytes_of(std::size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& c : v) c = static_cast<uint8_t>(rng());
  return v;
}

TEST(ControlLink, MessagesArriveInOrderBothWays) {
  two_links j;
  j.a->start(j.in_a.handlers());
  j.b->start(j.in_b.handlers());
  constexpr int n = 500;
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(j.a->send(1, static_cast<uint8_t>(1 + i % 3), i - 1, bytes_of(static_cast<std::size_t>(i * 7), i)));
  ASSERT_TRUE(j.b->send(0, 3, 7, bytes_of(0, 0)));
  ASSERT_TRUE(j.in_b.wait_messages(n));
  ASSERT_TRUE(j.in_a.wait_messages(1));
  for (int i = 0; i < n; ++i) {
    const auto& m = j.in_b.messages[static_cast<std::size_t>(i)];
    EXPECT_EQ(m.peer, 0);
    EXPECT_EQ(m.kind, 1 + i % 3);
    EXPECT_EQ(m.origin, i - 1);
    EXPECT_EQ(m.data, bytes_of(static_cast<std::size_t>(i * 7), i)) << "message " << i;
  }
  EXPECT_EQ(j.in_a.messages[0].peer, 1);
  EXPECT_EQ(j.in_a.messages[0].origin, 7);
  EXPECT_TRUE(j.in_a.messages[0].data.empty());
  EXPECT_TRUE(j.in_a.closes.empty());
  EXPECT_TRUE(j.in_b.closes.empty());
}

TEST(ControlLink, MessageLargerThanSocketBuffersWaitsInTheBacklogWithoutBlocking) {
  two_links j;
  j.a->start(j.in_a.handlers());
  // Rank 1 does not read yet: the kernel takes a few MiB, the rest waits in rank 0's backlog.
  auto big = bytes_of(32u << 20, 42);
  ASSERT_TRUE(j.a->send(1, 1, -1, big));
  EXPECT_GT(j.a->backlog_bytes(), 0u);
  ASSERT_TRUE(j.a->send(1, 2, 5, bytes_of(10, 1)));  // queued behind it, in order
  j.b->start(j.in_b.handlers());
  ASSERT_TRUE(j.in_b.wait_messages(2));
  EXPECT_EQ(j.in_b.messages[0].data, big);
  EXPECT_EQ(j.in_b.messages[1].kind, 2);
  EXPECT_EQ(j.in_b.messages[1].origin, 5);
  EXPECT_EQ(j.a->backlog_bytes(), 0u);
}

TEST(ControlLink, CloseExchangesGoodbyesAndThePeerHearsACleanLeave) {
  two_links j;
  j.a->start(j.in_a.handlers());
  j.b->start(j.in_b.handlers());
  ASSERT_TRUE(j.a->send(1, 1, -1, bytes_of(3, 3)));
  auto t0 = clock::now();
  j.a->close(5s);
  // Rank 1 answered the goodbye at once, so the close did not wait out its grace.
  EXPECT_LT(clock::now() - t0, 4s);
  ASSERT_TRUE(j.in_b.wait_closed());
  ASSERT_TRUE(j.in_b.wait_messages(1));  // the message before the goodbye arrived first
  EXPECT_EQ(j.in_b.closes[0].peer, 0);
  EXPECT_TRUE(j.in_b.closes[0].clean);
  EXPECT_NE(j.in_b.closes[0].why.message().find("rank 0"), std::string::npos) << j.in_b.closes[0].why.message();
  EXPECT_FALSE(j.a->send(1, 1, -1, bytes_of(1, 1)));  // closed: dropped
  EXPECT_FALSE(j.b->send(0, 1, -1, bytes_of(1, 1)));  // rank 0 said goodbye: dropped
  EXPECT_TRUE(j.in_a.closes.empty());                 // no handler ran on the closing side
  j.b->close(5s);
  EXPECT_EQ(j.in_b.closes.size(), 1u);
}

TEST(ControlLink, BothSidesClosingAtOnceFinishQuickly) {
  two_links j;
  j.a->start(j.in_a.handlers());
  j.b->start(j.in_b.handlers());
  auto t0 = clock::now();
  std::thread t([&] { j.b->close(5s); });
  j.a->close(5s);
  t.join();
  EXPECT_LT(clock::now() - t0, 4s);
  // A side whose goodbye arrived before its own close began heard a clean leave; none heard more.
  for (auto* in : {&j.in_a, &j.in_b}) {
    EXPECT_LE(in->closes.size(), 1u);
    for (auto& c : in->closes) EXPECT_TRUE(c.clean) << c.why.message();
  }
}

TEST(ControlLink, APeerThatDiesWithoutAGoodbyeIsReportedByRank) {
  auto [x, y] = tcp_pair();
  std::vector<unique_fd> fds(4);
  fds[3] = std::move(y);  // rank 3's end is `x`, a raw socket that just closes
  inbox in;  // outlives the link, whose thread calls into it
  control_link link(1, std::move(fds), limits());
  link.start(in.handlers());
  x.reset();
  ASSERT_TRUE(in.wait_closed());
  EXPECT_EQ(in.closes[0].peer, 3);
  EXPECT_FALSE(in.closes[0].clean);
  EXPECT_EQ(in.closes[0].why.code(), errc::connection_lost);
  EXPECT_NE(in.closes[0].why.message().find("rank 3"), std::string::npos) << in.closes[0].why.message();
  EXPECT_NE(in.closes[0].why.message().find("without a goodbye"), std::string::npos);
  EXPECT_FALSE(link.send(3, 1, -1, bytes_of(1, 1)));
}

TEST(ControlLink, APeerWhoseHostIsKnownIsReportedByRankAndHost) {
  auto [x, y] = tcp_pair();
  std::vector<unique_fd> fds(3);
  fds[2] = std::move(y);
  inbox in;
  control_link link(0, std::move(fds), limits(), {}, {"chorus-host0", "", "chorus-host1"});
  link.start(in.handlers());
  x.reset();
  ASSERT_TRUE(in.wait_closed());
  EXPECT_EQ(in.closes[0].peer, 2);
  EXPECT_NE(in.closes[0].why.message().find("rank 2 on chorus-host1 closed without a goodbye"), std::string::npos)
      << in.closes[0].why.message();
}

TEST(ControlLink, HeartbeatsKeepAnIdlePeerAliveLongPastTheTimeout) {
  two_links j(300ms);
  j.a->start(j.in_a.handlers());
  j.b->start(j.in_b.handlers());
  std::this_thread::sleep_for(1500ms);  // five timeouts without a single message
  {
    std::lock_guard lk(j.in_a.mu);
    EXPECT_TRUE(j.in_a.closes.empty()) << j.in_a.closes[0].why.message();
  }
  ASSERT_TRUE(j.a->send(1, 2, 0, bytes_of(3, 3)));
  ASSERT_TRUE(j.in_b.wait_messages(1));
  EXPECT_TRUE(j.in_b.messages.size() == 1 && j.in_b.messages[0].data == bytes_of(3, 3));  // heartbeats are not messages
  std::lock_guard lk(j.in_b.mu);
  EXPECT_TRUE(j.in_b.closes.empty());
}

TEST(ControlLink, AFrozenPeerIsDeclaredLostWithinTheTimeoutNamingIt) {
  // Rank 1's link exists but its thread never runs: like a stopped process whose kernel still
  // acknowledges bytes, it keeps the connection open and says nothing.
  two_links j(400ms);
  auto t0 = clock::now();
  j.a->start(j.in_a.handlers());
  ASSERT_TRUE(j.in_a.wait_closed());
  auto took = clock::now() - t0;
  EXPECT_GE(took, 380ms);
  EXPECT_LT(took, 3s);
  const auto& c = j.in_a.closes[0];
  EXPECT_EQ(c.peer, 1);
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.why.code(), errc::connection_lost);
  EXPECT_NE(c.why.message().find("rank 1 sent nothing"), std::string::npos) << c.why.message();
  EXPECT_NE(c.why.message().find("CHORUS_PEER_TIMEOUT_SECONDS"), std::string::npos) << c.why.message();
  EXPECT_FALSE(j.a->send(1, 1, 0, bytes_of(1, 1)));
}

struct bad_frame_case {
  const char* name;
  std::function<void(std::byte*)> spoil;  ///< applied to a valid control frame's header
  const char* expect;
};

/// Rank 1's link, started, with rank 0 a bare socket (`raw`) that writes whatever a test wants.
struct link_and_raw_peer {
  unique_fd raw;
  inbox in;  // outlives the link, whose thread calls into it
  std::unique_ptr<control_link> link;
  link_and_raw_peer() {
    auto [x, y] = tcp_pair();
    raw = std::move(x);
    std::vector<unique_fd> fds(2);
    fds[0] = std::move(y);
    link = std::make_unique<control_link>(1, std::move(fds), limits());
    link->start(in.handlers());
  }
};

class ControlLinkBadFrame : public ::testing::TestWithParam<bad_frame_case> {};

TEST_P(ControlLinkBadFrame, EndsTheConnectionNamingThePeerAndTheReason) {
  link_and_raw_peer j;
  auto& x = j.raw;
  auto& in = j.in;
  std::vector<std::byte> frame(wire::frame_header_size + 5);
  wire::frame_header h;
  h.kind = wire::frame_kind::control;
  h.job_id = job;
  h.length = 5;
  wire::encode(h, frame.data());
  GetParam().spoil(frame.data());
  ASSERT_TRUE(send_all(x.get(), frame.data(), frame.size(), clock::now() + 5s).ok());
  ASSERT_TRUE(in.wait_closed());
  EXPECT_EQ(in.closes[0].peer, 0);
  EXPECT_FALSE(in.closes[0].clean);
  EXPECT_EQ(in.closes[0].why.code(), errc::protocol);
  const auto& text = in.closes[0].why.message();
  EXPECT_NE(text.find("rank 0 sent a bad control frame"), std::string::npos) << text;
  EXPECT_NE(text.find(GetParam().expect), std::string::npos) << text;
  EXPECT_TRUE(in.messages.empty());
  // The sender is told why, in an abort frame, before the connection closes.
  std::array<std::byte, wire::frame_header_size> head{};
  ASSERT_TRUE(recv_all(x.get(), head.data(), head.size(), clock::now() + 5s).ok());
  auto back = wire::decode(head.data(), head.size(), limits());
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->kind, wire::frame_kind::abort);
  std::string reason(back->length, '\0');
  ASSERT_TRUE(recv_all(x.get(), reason.data(), reason.size(), clock::now() + 5s).ok());
  EXPECT_EQ(reason, "protocol: " + text);
}

TEST(ControlLink, AnAbortFrameEndsTheConnectionWithTheReasonItGives) {
  link_and_raw_peer j;
  auto& x = j.raw;
  auto& in = j.in;
  std::string text = "protocol: rank 1 sent a bad control frame: wrong magic";
  std::vector<std::byte> frame(wire::frame_header_size + text.size());
  wire::frame_header h;
  h.kind = wire::frame_kind::abort;
  h.job_id = job;
  h.length = static_cast<uint32_t>(text.size());
  wire::encode(h, frame.data());
  std::memcpy(frame.data() + wire::frame_header_size, text.data(), text.size());
  ASSERT_TRUE(send_all(x.get(), frame.data(), frame.size(), clock::now() + 5s).ok());
  ASSERT_TRUE(in.wait_closed());
  EXPECT_EQ(in.closes[0].peer, 0);
  EXPECT_FALSE(in.closes[0].clean);
  EXPECT_EQ(in.closes[0].why.code(), errc::protocol);
  EXPECT_EQ(in.closes[0].why.message(), "rank 1 sent a bad control frame: wrong magic (passed on by rank 0)");
  EXPECT_FALSE(j.link->send(0, 1, -1, bytes_of(1, 1)));
}

void put_u16(std::byte* p, uint16_t v) {
  p[0] = static_cast<std::byte>(v & 0xff);
  p[1] = static_cast<std::byte>(v >> 8);
}

INSTANTIATE_TEST_SUITE_P(
    Frames, ControlLinkBadFrame,
    ::testing::Values(bad_frame_case{"wrong_magic", [](std::byte* p) { p[0] = std::byte{0}; }, "magic"},
                      bad_frame_case{"wrong_job", [](std::byte* p) { p[8] ^= std::byte{1}; }, "job"},
                      bad_frame_case{"data_kind", [](std::byte* p) { put_u16(p + 6, 1); }, "expected control"},
                      bad_frame_case{"too_short", [](std::byte* p) { p[28] = std::byte{2}; }, "expected control"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace chorus::tcp
