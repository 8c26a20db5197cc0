// A job's data plane under a flood: rank 0 of a 4-rank job listens for its peers' connections
// while 500 silent connections and 80 hostile clients (garbage hellos, 2 GiB length prefixes,
// connect-and-close, handshakes with a wrong secret) hit that port, 340 of them before ranks 1-3
// start and the rest while they connect. With at most 64 connections in their handshake, each
// newcomer evicts the oldest, and silent ones never hold a handshake thread, so the job forms
// well before the handshake timeout (5 s) that frees a slot. Before, the queue behind 16
// handshake threads filled, and the real streams were refused and the job failed to start.
// Bounded: the flood is a fixed count, every wait has a deadline, ranks are killed by pid.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/tcp/handshake_io.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#include "tests/multiproc/local_job.hpp"
#include "tests/support/hostile_clients.hpp"

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

struct target {
  tcp::endpoint ep;
  uint64_t session_id = 0;  // so that a wrong-secret handshake gets as far as the MAC
};

/// Silent connections, held open until the end, and hostile clients that each try one bad
/// start and close.
struct flood {
  tcp::endpoint ep;
  uint64_t session_id = 0;
  std::vector<int> held;
  int failed = 0;
  void run(int silent, int hostile) {
    for (int i = 0; i < silent; ++i) {
      int fd = dial_loopback(ep.port);
      if (fd < 0) ++failed;
      else held.push_back(fd);
    }
    for (int i = 0; i < hostile; ++i) {
      int fd = dial_loopback(ep.port);
      if (fd < 0) {
        ++failed;
        continue;
      }
      // Garbage, a 2 GiB length prefix, a handshake with a wrong secret, connect and close.
      if (i % 4 == 2) {  // claims rank 1's stream 0 without the secret
        tcp::handshake_config wrong{session_id, "not-the-job-secret", 1, 4, 9};
        (void)tcp::client_handshake(fd, wrong, 0, 0, tcp::clock::now() + 2s);
      }
      static constexpr bad_start kinds[] = {bad_start::garbage, bad_start::huge_length, bad_start::nothing,
                                            bad_start::nothing};
      send_bad_start_and_close(fd, kinds[i % 4]);
    }
  }
  ~flood() {
    for (int fd : held) ::close(fd);
  }
};

/// Rank 0's data endpoint, read from the store as a port scan would find it.
result<target> rank0_data_endpoint(const local_job::env_map& vars, int size) {
  auto env = read_process_env([&](const char* name) -> const char* {
    if (std::strcmp(name, "CHORUS_RANK") == 0 || std::strcmp(name, "CHORUS_LOCAL_RANK") == 0) {
      static const std::string last = std::to_string(size - 1);
      return last.c_str();
    }
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  if (!env) return env.error();
  auto rdv = rendezvous::open(*env);
  if (!rdv) return rdv.error();
  auto text = (*rdv)->get("data/0", 20s);
  if (!text) return text.error();
  auto ep = tcp::parse_endpoint(*text);
  if (!ep) return ep.error();
  return target{*ep, (*rdv)->session_id()};
}

TEST(data_flood, four_ranks_form_while_silent_and_hostile_clients_flood_rank0s_data_port) {
  constexpr int size = 4;
  local_job job(size, {CHORUS_TESTRANK_PATH, "accept-intruder"}, {}, 1);  // rank 0 alone first
  auto ep = rank0_data_endpoint(job.env(), size);
  ASSERT_TRUE(ep.ok()) << ep.error().to_string() << "\n" << job.output(0);

  flood before{ep->ep, ep->session_id}, during{ep->ep, ep->session_id};
  before.run(300, 40);
  const auto started = clock::now();
  job.start_rest();
  std::thread flooder([&] { during.run(200, 40); });
  bool formed = true;  // every rank within one deadline (the connect timeout, 20 s)
  const auto deadline = started + 20s;
  for (int r = 0; r < size && formed; ++r)
    formed = job.wait_for_output(
        r, "ready", std::max(0ms, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now())));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started);
  flooder.join();
  auto results = job.wait(30s);
  std::printf("data flood: %zu silent connections held, %d failed to connect; the job formed in %lld ms\n",
              before.held.size() + during.held.size(), before.failed + during.failed,
              static_cast<long long>(took.count()));
  for (auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << ":\n" << r.output;
  EXPECT_TRUE(formed);
  // Not waiting for the handshake timeout (5 s) to free the slots silent sockets hold.
  EXPECT_LT(took, 4s);
  EXPECT_GE(before.held.size(), 64u) << "the flood did not fill rank 0's handshake slots (64)";
  EXPECT_NE(results[0].output.find("without finishing its handshake"), std::string::npos)
      << "rank 0 logs the evictions:\n"
      << results[0].output;
}

}  // namespace
}  // namespace chorus::testing
