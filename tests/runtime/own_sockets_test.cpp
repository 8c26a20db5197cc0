// tcp::sockets_connected_to: the connected socket to an endpoint is found, and nothing else.
#include "runtime/transport/tcp/own_sockets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "runtime/transport/tcp/socket_util.hpp"

namespace chorus::tcp {
namespace {

bool contains(const std::vector<int>& v, int fd) { return std::find(v.begin(), v.end(), fd) != v.end(); }

TEST(OwnSockets, TheSocketConnectedToAnEndpointIsFoundAndNoOther) {
  uint16_t port = 0, other_port = 0;
  auto listener = listen_on("127.0.0.1", 0, &port);
  ASSERT_TRUE(listener) << listener.error().to_string();
  auto other = listen_on("127.0.0.1", 0, &other_port);
  ASSERT_TRUE(other) << other.error().to_string();
  const auto deadline = clock::now() + std::chrono::seconds(10);
  auto a = connect_to({"127.0.0.1", port}, deadline);
  ASSERT_TRUE(a) << a.error().to_string();
  auto b = connect_to({"127.0.0.1", other_port}, deadline);
  ASSERT_TRUE(b) << b.error().to_string();
  unique_fd accepted(::accept(listener->get(), nullptr, nullptr));
  ASSERT_GE(accepted.get(), 0);

  auto found = sockets_connected_to("127.0.0.1", port);
  EXPECT_EQ(found, std::vector<int>{a->get()});  // not the listener, not the accepted end, not b
  EXPECT_EQ(sockets_connected_to("127.0.0.1", other_port), std::vector<int>{b->get()});
  // Another address at the same port: nothing. A name matches on the port alone.
  EXPECT_TRUE(sockets_connected_to("127.0.0.2", port).empty());
  EXPECT_TRUE(contains(sockets_connected_to("localhost", port), a->get()));
  // Closed: gone.
  const int fd = a->get();
  a->reset();
  EXPECT_FALSE(contains(sockets_connected_to("127.0.0.1", port), fd));
}

TEST(OwnSockets, AnIpv6ConnectionIsFoundWhereTheHostHasIpv6Loopback) {
  uint16_t port = 0;
  auto listener = listen_on("::1", 0, &port);
  if (!listener) GTEST_SKIP() << "no IPv6 loopback here: " << listener.error().to_string();
  auto a = connect_to({"::1", port}, clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_EQ(sockets_connected_to("::1", port), std::vector<int>{a->get()});
  EXPECT_TRUE(sockets_connected_to("127.0.0.1", port).empty());
}

}  // namespace
}  // namespace chorus::tcp
