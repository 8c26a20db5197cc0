// chorus-testrank pipeline-wire-shm EXPECT: fp16 asked for through the C++ API (an allreduce
// and an allgather) among ranks on shared memory; wire_shm.cpp says what EXPECT means.
#include <chrono>
#include <cstring>
#include <string>

#include "chorus/chorus.hpp"
#include "tests/multiproc/rank/wire_shm_checks.hpp"

namespace chorus::testrank {

int run_pipeline_wire_shm(int argc, char** argv) {
  bool exact = false;
  if (!parse_expect(argc, argv, exact)) return 2;
  if (auto st = init(); !st.ok()) {
    std::printf("testrank error: init: %s\n", st.to_string().c_str());
    return 3;
  }
  const int rank = chorus::rank(), size = chorus::size();
  const op_options fp16{compression::fp16, std::nullopt, 1.0f};
  auto buf = input_of(rank, elements, 2);
  auto h = allreduce_async("shm.sum", tensor_view{buf.data(), dtype::f32, {int64_t(buf.size())}}, reduce_op::sum, fp16);
  std::string wrong;
  if (auto st = h.wait(std::chrono::seconds(60)); !st.ok()) wrong = "allreduce: " + st.to_string();
  if (wrong.empty()) wrong = check_sum(buf, size, exact, 2);
  // Allgather: rows come back as sent (exact) or cast to fp16 and back (rounded).
  auto rows = input_of(rank, 3 * 4, 3);
  auto g = allgather_async("shm.gather", tensor_view{rows.data(), dtype::f32, {3, 4}}, fp16);
  if (auto st = g.wait(std::chrono::seconds(60)); wrong.empty() && !st.ok()) wrong = "allgather: " + st.to_string();
  if (wrong.empty()) {
    const auto& bytes = g.gathered();
    for (int r = 0; r < size && wrong.empty(); ++r) {
      const auto theirs = input_of(r, rows.size(), 3);
      for (std::size_t i = 0; i < theirs.size(); ++i) {
        float f;
        std::memcpy(&f, bytes.data() + 4 * (static_cast<std::size_t>(r) * theirs.size() + i), 4);
        const float want = exact ? theirs[i] : fp16_round(theirs[i]);
        if (std::bit_cast<uint32_t>(f) != std::bit_cast<uint32_t>(want)) {
          wrong = "allgather row of rank " + std::to_string(r) + " element " + std::to_string(i);
          break;
        }
      }
    }
  }
  shutdown();
  return report("pipeline-wire-shm", exact, wrong);
}

}  // namespace chorus::testrank
