// chorus-testrank wire-shm EXPECT and pipeline-wire-shm EXPECT: fp16 asked for among ranks on
// shared memory (tests/multiproc/wire_shm_test.cpp). EXPECT exact: the gate dropped compression,
// so results equal the uncompressed sum bit for bit (inputs fp16 would round; N = 2, where the
// sum of two floats does not depend on order); EXPECT rounded: compression ran (forced with
// CHORUS_COMPRESSION_SHM=on, or a peer over TCP), results replay the ring's fp16 casts.
// wire-shm runs communicator::allreduce with wire options; pipeline-wire-shm runs an allreduce
// and an allgather through the C++ API (pipeline_wire_shm.cpp). Prints "wire-shm: <mode> <expect> passed".
// Exit codes: 0 pass, 1 wrong result, 2 usage, 3 an operation failed.
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/collectives/communicator.hpp"
#include "tests/multiproc/rank/wire_shm_checks.hpp"

namespace chorus::testrank {

int run_wire_shm(communicator& c, int argc, char** argv) {
  bool exact = false;
  if (!parse_expect(argc, argv, exact)) return 2;
  std::printf("wire-shm rank=%d size=%d gate: %s\n", c.rank(), c.size(), c.wire_compression().describe().c_str());
  auto buf = input_of(c.rank(), elements, 1);
  wire_options w;
  w.wire = compression::fp16;
  if (auto st = c.allreduce(buf.data(), buf.size(), dtype::f32, reduce_op::sum, w); !st.ok()) {
    std::printf("testrank error: %s\n", st.to_string().c_str());
    return 3;
  }
  return report("wire-shm", exact, check_sum(buf, c.size(), exact, 1));
}

}  // namespace chorus::testrank
