// A job's rendezvous under a flood: while 8 ranks start, 300 silent connections and 40 hostile
// clients (garbage hellos, huge length prefixes, connect-and-close) hit rank 0's store, with its
// default limits (64 connections in their handshake). New connections evict the oldest silent
// ones, so every rank gathers every endpoint well before the handshake timeout (5 s) that would
// otherwise free the slots. Bounded: the flood is a fixed count, every wait has a deadline.
#include "runtime/rendezvous/rendezvous.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <latch>
#include <string>
#include <thread>
#include <vector>
#include "tests/support/hostile_clients.hpp"
#include "tests/support/rendezvous_env.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// The flood: `silent` connections that never send a byte (held open until `release`), and
/// `hostile` clients that each send one bad start and close. Retries a connection refused while
/// rank 0 is not listening yet, for at most 3 s.
struct flood {
  std::vector<int> held;
  int refused = 0;
  void run(uint16_t port, int silent, int hostile) {
    const auto until = clock::now() + 3s;
    while (static_cast<int>(held.size()) < silent && clock::now() < until) {
      int fd = testing::dial_loopback(port);
      if (fd < 0) {
        ++refused;
        std::this_thread::sleep_for(5ms);
        continue;
      }
      held.push_back(fd);
    }
    for (int i = 0; i < hostile; ++i) {
      int fd = testing::dial_loopback(port);
      if (fd < 0) continue;
      testing::send_bad_start_and_close(fd, static_cast<testing::bad_start>(i % 3));
    }
  }
  ~flood() {
    for (int fd : held) ::close(fd);
  }
};

TEST(RendezvousFlood, EightRanksStartWhileSilentAndHostileClientsFloodTheStore) {
  constexpr int size = 8;
  const uint16_t port = testing::free_rendezvous_port();
  const auto started = clock::now();
  flood f;
  std::thread flooder([&] { f.run(port, 300, 40); });
  std::latch all_gathered(size);  // rank 0 keeps serving until every rank has read
  std::vector<std::future<status>> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r]() -> status {
      // Rank 0 first; the others start once the flood has begun (20 ms apart).
      std::this_thread::sleep_for(std::chrono::milliseconds(r == 0 ? 0 : 50 + 20 * r));
      auto done = [&](status st) {
        all_gathered.count_down();
        return st;
      };
      auto rdv = rendezvous::open(testing::rendezvous_env(r, size, port, 20s));
      if (!rdv) return done(rdv.error());
      if (auto st = (*rdv)->publish("ep/" + std::to_string(r), "endpoint-" + std::to_string(r)); !st.ok())
        return done(st);
      auto got = (*rdv)->gather("ep/", 20s);
      if (!got) return done(got.error());
      all_gathered.arrive_and_wait();
      if (got->size() != size) return {errc::internal, "gathered " + std::to_string(got->size()) + " endpoints"};
      for (int k = 0; k < size; ++k)
        if ((*got)[static_cast<std::size_t>(k)] != "endpoint-" + std::to_string(k))
          return {errc::internal, "endpoint " + std::to_string(k) + " is '" + (*got)[static_cast<std::size_t>(k)] + "'"};
      return {};
    }));
  }
  std::vector<std::string> failures;
  for (int r = 0; r < size; ++r)
    if (auto st = ranks[static_cast<std::size_t>(r)].get(); !st.ok())
      failures.push_back("rank " + std::to_string(r) + ": " + st.to_string());
  flooder.join();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started);
  std::printf("flood: %zu silent connections held, %d refused; the job gathered in %lld ms\n", f.held.size(),
              f.refused, static_cast<long long>(took.count()));
  EXPECT_TRUE(failures.empty()) << ::testing::PrintToString(failures);
  // Not waiting for the handshake timeout (5 s) to free the slots the silent ones hold.
  EXPECT_LT(took, 3s);
  EXPECT_GE(f.held.size(), 64u) << "the flood did not fill the store's handshake slots (64)";
}

}  // namespace
}  // namespace chorus
