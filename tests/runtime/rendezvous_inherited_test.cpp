// Rank 0 serving the store on a listening socket its launcher bound and handed over
// (CHORUS_RENDEZVOUS_FD): nobody else can take the port meanwhile, ranks that connect before the
// store runs are served, a later round serves on it again, and a descriptor that is not that
// socket is named and the port bound as without one.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/inherited_listener.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "tests/support/bind_probe.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using chorus::testing::bind_errno;

// A TCP socket on 127.0.0.1 with a port the kernel picked; listening unless told otherwise.
// Inheritable, as a launcher hands it over.
int loopback_socket(uint16_t* port, bool listen = true) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  if (listen) EXPECT_EQ(::listen(fd, 16), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

process_env make_env(int rank, uint16_t port, int fd = -1) {
  process_env env;
  env.rank = rank;
  env.size = 2;
  env.local_rank = rank;
  env.local_size = 2;
  env.rendezvous_port = port;
  env.rendezvous_fd = fd;
  env.rendezvous_timeout = 3000ms;
  env.source = "chorus";
  return env;
}

TEST(RendezvousInherited, RankZeroServesOnTheHeldPortAndNobodyElseCanBindIt) {
  uint16_t port = 0;
  int held = loopback_socket(&port);
  ASSERT_EQ(bind_errno(port), EADDRINUSE) << "the held port must not be bindable by anyone else";
  ASSERT_EQ(::fcntl(held, F_GETFD) & FD_CLOEXEC, 0);
  for (int round = 0; round < 2; ++round) {
    // Rank 1 first: its connection waits in the held socket's backlog until rank 0 serves.
    auto rank1 = std::async(std::launch::async, [&] { return rendezvous::open(make_env(1, port)); });
    std::this_thread::sleep_for(50ms);
    auto rank0 = rendezvous::open(make_env(0, port, held));
    ASSERT_TRUE(rank0.ok()) << rank0.error().to_string();
    auto r1 = rank1.get();
    ASSERT_TRUE(r1.ok()) << r1.error().to_string();
    ASSERT_TRUE((*r1)->publish("ep/1", "one").ok());
    ASSERT_TRUE((*rank0)->publish("ep/0", "zero").ok());
    auto got = (*r1)->gather("ep/", 1000ms);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(*got, (std::vector<std::string>{"zero", "one"}));
    EXPECT_NE(::fcntl(held, F_GETFD) & FD_CLOEXEC, 0) << "children of rank 0 must not inherit the port";
    r1->reset();
    rank0->reset();
    // The store is gone but the port stays held for the next round (init after shutdown).
    EXPECT_EQ(bind_errno(port), EADDRINUSE) << "round " << round;
  }
  ::close(held);
  EXPECT_EQ(bind_errno(port), 0) << "closing the last descriptor frees the port";
}

TEST(RendezvousInherited, ADescriptorThatIsNotTheListenerIsNamedAndThePortBoundInstead) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  uint16_t free_port = 0;
  ::close(loopback_socket(&free_port));
  auto st = check_inherited_listener(pipe_fds[0], free_port);
  EXPECT_NE(st.message().find("CHORUS_RENDEZVOUS_FD=" + std::to_string(pipe_fds[0]) + " is not a socket"),
            std::string::npos)
      << st.to_string();
  // Rank 0 warns and binds the port itself: the job still starts.
  auto rank1 = std::async(std::launch::async, [&] { return rendezvous::open(make_env(1, free_port)); });
  auto rank0 = rendezvous::open(make_env(0, free_port, pipe_fds[0]));
  ASSERT_TRUE(rank0.ok()) << rank0.error().to_string();
  auto r1 = rank1.get();
  ASSERT_TRUE(r1.ok()) << r1.error().to_string();
  r1->reset();
  rank0->reset();
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);

  st = check_inherited_listener(pipe_fds[0], free_port);
  EXPECT_NE(st.message().find("is not open"), std::string::npos) << st.to_string();

  uint16_t other = 0;
  int listening = loopback_socket(&other);
  st = check_inherited_listener(listening, static_cast<uint16_t>(other + 1));
  EXPECT_NE(st.message().find("listens on port " + std::to_string(other) + ", not the rendezvous port " +
                              std::to_string(other + 1)),
            std::string::npos)
      << st.to_string();
  EXPECT_TRUE(check_inherited_listener(listening, other).ok());
  ::close(listening);

  int bound_only = loopback_socket(&other, /*listen=*/false);
  st = check_inherited_listener(bound_only, other);
  EXPECT_NE(st.message().find("is not listening"), std::string::npos) << st.to_string();
  ::close(bound_only);
}

TEST(RendezvousInherited, TheVariableIsReadAsADescriptorNumber) {
  std::map<std::string, std::string> vars{{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "2"},
                                          {"CHORUS_RENDEZVOUS", "127.0.0.1:4000"}};
  auto lookup = [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  auto env = read_process_env(lookup);
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rendezvous_fd, -1);
  vars["CHORUS_RENDEZVOUS_FD"] = "7";
  env = read_process_env(lookup);
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rendezvous_fd, 7);
  vars["CHORUS_RENDEZVOUS_FD"] = "seven";
  env = read_process_env(lookup);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.error().message().find("CHORUS_RENDEZVOUS_FD"), std::string::npos) << env.error().to_string();
}

}  // namespace
}  // namespace chorus
