// fp16 asked for through communicator::allreduce among real processes on one host
// (chorus-testrank wire-shm, tests/multiproc/rank/wire_shm.cpp): over shared-memory rings the
// gate drops it and the results are the uncompressed sum bit for bit (inputs fp16 would round);
// CHORUS_COMPRESSION_SHM=on, or a peer over TCP (CHORUS_TEST_HOSTS fakes a second host), keeps
// it and the results are the fp16 ring's. Each rank then asks for the NaN/Inf check too, with a
// NaN in the last rank's input: every rank names that rank, and where compression was dropped
// both calls ran on the calling thread's mailboxes (as plain ones do), elsewhere neither did.
// Hard time bound per job.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/multiproc/job_checks.hpp"
#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {
namespace {

void run_job(int size, const std::string& expect, std::map<std::string, std::string> env) {
  local_job job(size, {CHORUS_TESTRANK_PATH, "wire-shm", expect}, std::move(env));
  auto results = job.wait(std::chrono::seconds(60));
  expect_all_passed(results);
  expect_every_rank_printed(results, "wire-shm: wire-shm " + expect + " passed");
}

TEST(wire_shm, fp16_among_ranks_on_shared_memory_is_the_exact_uncompressed_sum) {
  run_job(2, "exact", {});
}

TEST(wire_shm, fp16_forced_on_shared_memory_is_rounded) {
  run_job(2, "rounded", {{"CHORUS_COMPRESSION_SHM", "on"}});
}

TEST(wire_shm, fp16_with_a_peer_over_tcp_is_rounded) {
  run_job(3, "rounded", {{"CHORUS_TEST_HOSTS", "2,1"}});
}

TEST(wire_shm, fp16_without_shared_memory_rings_is_rounded) {
  run_job(2, "rounded", {{"CHORUS_SHM_BYTES", "0"}});
}

}  // namespace
}  // namespace chorus::testing
