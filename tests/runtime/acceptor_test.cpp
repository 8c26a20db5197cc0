// The acceptor (runtime/transport/tcp/acceptor.hpp) under silent clients: sockets that connect
// and never speak must not hold the mesh (before, each held the one accept thread for 5 s, so
// 13 of them outlasted the 60 s connect timeout), and closing the acceptor ends their
// handshakes at once.
#include "runtime/transport/tcp/acceptor.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace chorus::tcp {
namespace {

using namespace std::chrono_literals;

handshake_config config(int rank) {
  handshake_config c;
  c.job_id = 0xACCE;
  c.secret = "0123456789abcdef0123456789abcdef";
  c.rank = rank;
  c.size = 2;
  c.num_streams = 2;
  return c;
}

TEST(Acceptor, SilentSocketsDoNotHoldTheMeshAndCloseEndsTheirHandshakes) {
  uint16_t port = 0;
  auto listener = listen_on("127.0.0.1", 0, &port);
  ASSERT_TRUE(listener.ok()) << listener.error().to_string();
  auto acc = std::make_unique<acceptor>(std::move(*listener), config(0));

  std::vector<unique_fd> silent;  // more than the handshake pool holds at once
  for (int i = 0; i < acceptor::max_handshakes + 8; ++i) {
    auto fd = connect_to({"127.0.0.1", port}, clock::now() + 5s);
    ASSERT_TRUE(fd.ok()) << fd.error().to_string();
    silent.push_back(std::move(*fd));
  }
  std::this_thread::sleep_for(100ms);  // the silent ones are accepted first

  auto t0 = clock::now();
  std::vector<status> client(2);
  std::vector<unique_fd> client_fds(2);
  std::vector<std::thread> clients;
  for (int s = 0; s < 2; ++s)
    clients.emplace_back([&, s] {
      auto fd = connect_to({"127.0.0.1", port}, clock::now() + 5s);
      if (!fd.ok()) {
        client[s] = fd.error();
        return;
      }
      client[s] = client_handshake(fd->get(), config(1), s, 0, clock::now() + 20s);
      client_fds[s] = std::move(*fd);
    });
  auto inbound = acc->wait_inbound(clock::now() + 20s);
  for (auto& c : clients) c.join();
  auto took = clock::now() - t0;
  ASSERT_TRUE(inbound.ok()) << inbound.error().to_string();
  for (auto& st : client) EXPECT_TRUE(st.ok()) << st.to_string();
  // The silent sockets filled the pool for up to 5 s; the real streams got through no later
  // than one handshake timeout, not one per silent socket (24 x 5 s).
  EXPECT_LT(took, acceptor::handshake_timeout + 3s);
  EXPECT_GE((*inbound)[1][0].get(), 0);
  EXPECT_GE((*inbound)[1][1].get(), 0);

  auto t1 = clock::now();
  acc.reset();  // silent sockets still in their handshakes: shut down, not waited out
  EXPECT_LT(clock::now() - t1, 2s);
}

}  // namespace
}  // namespace chorus::tcp
