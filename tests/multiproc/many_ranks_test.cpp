// 64 ranks on one host, at the default settings (8 streams, 2 MiB shared-memory rings): every
// rank dials every lower one, so rank 0 takes 63 x 8 connections at once, far more than its
// acceptor's 64 pending slots (acceptor.hpp: the evicted dial again, peer_dial.hpp). Before the
// rings were budgeted (shm/ring_budget.hpp) and the TCP receive scratches made on first use
// (mesh_transport.cpp), such a job asked for 63 x 8 x 2 MiB of rings and 63 x 8 x 1 MiB of
// scratch per rank, about 100 GiB on this host, and the OOM killer ended it. Each rank checks a
// few collectives exactly (tests/multiproc/rank/collective_checks.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "runtime/transport/shm/mailbox.hpp"
#include "runtime/transport/shm/ring_budget.hpp"
#include "runtime/transport/shm/segment.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

TEST(many_ranks, sixty_four_ranks_on_one_host_form_the_mesh_and_are_exact_within_their_memory_share) {
  constexpr int size = 64, streams = 8;
  constexpr std::size_t ring_bytes = 2u << 20;  // CHORUS_SHM_BYTES's default
  // The most rings a rank may take now: free memory only shrinks while the job starts.
  auto plan = shm::plan_rings(size - 1, streams, shm::segment::footprint(ring_bytes),
                              shm::segment::footprint(shm::mailbox_capacity()), shm::free_shared_memory());
  local_job job(size, {CHORUS_TESTRANK_PATH, "few"},
                {{"CHORUS_NUM_STREAMS", std::to_string(streams)}, {"CHORUS_SHM_BYTES", std::to_string(ring_bytes)}});
  auto results = job.wait(std::chrono::seconds(90));
  for (auto& r : results) {
    ASSERT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    ASSERT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed (signal " << r.signal << "):\n"
                                              << r.output;
    const std::string head = "testrank: few exact on rank " + std::to_string(r.rank) + " of 64, 8 streams, ";
    auto at = r.output.find(head);
    ASSERT_NE(at, std::string::npos) << r.output;
    int rings = -1;
    ASSERT_EQ(std::sscanf(r.output.c_str() + at + head.size(), "%d", &rings), 1) << r.output;
    EXPECT_LE(rings, (size - 1) * plan.streams)
        << "rank " << r.rank << " made more rings than its share of " << plan.share_bytes << " bytes holds";
  }
}

}  // namespace
}  // namespace chorus::testing
