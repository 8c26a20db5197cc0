// chorus-testrank wire-shm EXPECT and pipeline-wire-shm EXPECT: fp16 asked for among ranks on
// shared memory (tests/multiproc/wire_shm_test.cpp). EXPECT exact: the gate dropped compression,
// so results equal the uncompressed sum bit for bit (inputs fp16 would round; N = 2, where the
// sum of two floats does not depend on order); EXPECT rounded: compression ran (forced with
// CHORUS_COMPRESSION_SHM=on, or a peer over TCP), results replay the ring's fp16 casts.
// wire-shm runs communicator::allreduce with wire options, then with the NaN/Inf check too (a
// NaN in the last rank's input, named on every rank), and says which path ran: the calling
// thread's mailboxes where compression was dropped on shared memory, the I/O thread otherwise;
// pipeline-wire-shm runs an allreduce and an allgather through the C++ API
// (pipeline_wire_shm.cpp). Prints "wire-shm: <mode> <expect> passed".
// Exit codes: 0 pass, 1 wrong result, 2 usage, 3 an operation failed.
#include <bit>
#include <chrono>
#include <cmath>
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
  const uint64_t caller_before = c.mailbox_sent(shm::mailbox_use::caller);
  if (auto st = c.allreduce(buf.data(), buf.size(), dtype::f32, reduce_op::sum, w); !st.ok()) {
    std::printf("testrank error: %s\n", st.to_string().c_str());
    return 3;
  }
  if (auto wrong = check_sum(buf, c.size(), exact, 1); !wrong.empty()) return report("wire-shm", exact, wrong);
  // The NaN/Inf check, with fp16 asked too: the last rank's input holds a NaN, and every rank's
  // report names that rank (from the mailboxes' fold where compression was dropped, from the
  // checked ring's flags where it runs).
  auto checked = input_of(c.rank(), elements, 2);
  if (c.rank() == c.size() - 1) checked[elements / 2] = std::nanf("");
  w.check = true;
  w.report = std::make_shared<nonfinite_report>();
  if (auto st = c.allreduce(checked.data(), checked.size(), dtype::f32, reduce_op::sum, w); !st.ok()) {
    std::printf("testrank error: %s\n", st.to_string().c_str());
    return 3;
  }
  if (w.report->ranks() != std::vector<int>{c.size() - 1})
    return report("wire-shm", exact, "the NaN/Inf check named " + std::to_string(w.report->ranks().size()) +
                                         " ranks, expected rank " + std::to_string(c.size() - 1) + " alone");
  // Where the compression was dropped and every rank shares memory, both calls ran on the
  // calling thread, as a plain allreduce does: the caller's mailboxes carried them.
  const bool caller = c.mailbox_sent(shm::mailbox_use::caller) - caller_before >= 2 * elements * sizeof(float);
  if (exact && c.runs_on_caller(elements * sizeof(float), dtype::f32, reduce_op::sum) && !caller)
    return report("wire-shm", exact, "fp16 dropped on shared memory, yet the calls left the caller's path");
  if (!exact && caller) return report("wire-shm", exact, "compressed calls ran on the caller's mailboxes");
  return report("wire-shm", exact, {});
}

}  // namespace chorus::testrank
