// Small allreduces on the calling thread, looped and mismatched (small_checks.hpp).
#include "tests/multiproc/rank/small_checks.hpp"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/multiproc/rank/hier_checks.hpp"

namespace chorus::testrank {

status run_small_loop(communicator& c, int seconds) {
  constexpr std::size_t count = 1024;  // 4 KiB of f32
  std::printf("small on caller: %s\n", c.runs_on_caller(count * 4, dtype::f32, reduce_op::sum) ? "yes" : "no");
  std::fflush(stdout);
  const int kill_at = self_kill_iteration(c.rank());
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<float> buf(count);
  for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
    if (i == kill_at) {
      std::printf("testrank: killing myself before small allreduce %d\n", i);
      std::fflush(stdout);
      ::raise(SIGKILL);
    }
    for (std::size_t k = 0; k < count; ++k) buf[k] = static_cast<float>(c.rank() + i % 1000 + k % 7);
    auto st = c.allreduce(buf.data(), count, dtype::f32, reduce_op::sum);
    if (!st.ok()) return st;
    for (std::size_t k = 0; k < count; ++k) {
      float want = 0;
      for (int r = 0; r < c.size(); ++r) want += static_cast<float>(r + i % 1000 + k % 7);
      if (buf[k] != want)
        return status{errc::internal, "small allreduce " + std::to_string(i) + ": element " + std::to_string(k) +
                                          " is " + std::to_string(buf[k]) + ", expected " + std::to_string(want)};
    }
    if (i < 10 || i % 1000 == 0) {
      std::printf("iteration %d\n", i);
      std::fflush(stdout);
    }
  }
  return {};
}

status run_small_mismatch(communicator& c) {
  std::vector<float> buf(1024 + 256 * static_cast<std::size_t>(c.rank()), 1.0f);
  return c.allreduce(buf.data(), buf.size(), dtype::f32, reduce_op::sum);
}

}  // namespace chorus::testrank
