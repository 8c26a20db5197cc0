// dial_peer (runtime/transport/tcp/peer_dial.hpp) against a server that closes the first
// connections during their handshake, as a flooded acceptor evicts them: the client dials again
// and gets in. A wrong secret is final: one connection, errc::auth naming the rank and address.
#include "runtime/transport/tcp/peer_dial.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

namespace chorus::tcp {
namespace {

using namespace std::chrono_literals;

handshake_config config(int rank, std::string secret = "0123456789abcdef0123456789abcdef") {
  handshake_config c;
  c.job_id = 0xD1A1;
  c.secret = std::move(secret);
  c.rank = rank;
  c.size = 2;
  c.num_streams = 1;
  return c;
}

// Rank 0's side: accepts `connections` connections; the first `drop` lose their connection after
// the hello arrived (as an eviction does), the rest are handshaken.
struct fake_rank0 {
  unique_fd listener;
  uint16_t port = 0;
  std::atomic<int> accepted{0};
  std::thread thread;
  fake_rank0(int connections, int drop) {
    auto l = listen_on("127.0.0.1", 0, &port);
    EXPECT_TRUE(l.ok());
    listener = std::move(*l);
    thread = std::thread([this, connections, drop] {
      for (int i = 0; i < connections; ++i) {
        unique_fd fd(::accept(listener.get(), nullptr, nullptr));
        if (fd.get() < 0) return;
        ++accepted;
        if (i < drop) {
          char b[8];
          (void)!::recv(fd.get(), b, sizeof b, 0);  // the hello's first bytes, then gone
          continue;
        }
        (void)server_handshake(fd.get(), config(0), clock::now() + 5s, [](const client_identity&) { return status{}; });
      }
    });
  }
  ~fake_rank0() {
    ::shutdown(listener.get(), SHUT_RDWR);
    thread.join();
  }
};

TEST(PeerDial, DialsAgainAfterTheAcceptorClosedItsHandshake) {
  fake_rank0 server(3, 2);
  auto fd = dial_peer({"127.0.0.1", server.port}, config(1), 0, 0, clock::now() + 10s);
  ASSERT_TRUE(fd.ok()) << fd.error().to_string();
  EXPECT_EQ(server.accepted.load(), 3);
}

TEST(PeerDial, AWrongSecretIsNotDialledAgain) {
  fake_rank0 server(1, 0);
  auto t0 = clock::now();
  auto fd = dial_peer({"127.0.0.1", server.port}, config(1, "not-the-job-secret-not-the-job-se"), 0, 0,
                      clock::now() + 10s);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.error().code(), errc::auth) << fd.error().to_string();
  EXPECT_NE(fd.error().message().find("handshake with rank 0 at 127.0.0.1:" + std::to_string(server.port)),
            std::string::npos)
      << fd.error().to_string();
  EXPECT_EQ(server.accepted.load(), 1);
  EXPECT_LT(clock::now() - t0, 2s);
}

TEST(PeerDial, GivesUpAtTheDeadlineNamingThePeerAndTheAttempts) {
  fake_rank0 server(1000, 1000);  // every handshake dropped
  auto t0 = clock::now();
  auto fd = dial_peer({"127.0.0.1", server.port}, config(1), 0, 0, clock::now() + 1500ms);
  auto took = clock::now() - t0;
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.error().code(), errc::connection_lost) << fd.error().to_string();
  EXPECT_NE(fd.error().message().find("handshake with rank 0 at 127.0.0.1:"), std::string::npos);
  EXPECT_NE(fd.error().message().find("(attempt "), std::string::npos) << fd.error().to_string();
  EXPECT_GT(server.accepted.load(), 3);
  EXPECT_LT(took, 2500ms);
}

}  // namespace
}  // namespace chorus::tcp
