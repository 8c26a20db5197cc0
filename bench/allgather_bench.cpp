// The allgather benchmark: timing loop, result check, RESULT lines (see allgather_bench.hpp).
#include "bench/allgather_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace chorus::bench {
namespace {

float value(int rank, int iteration, std::size_t i) {
  return static_cast<float>((i + static_cast<std::size_t>(rank) * 7 + static_cast<std::size_t>(iteration)) % 251);
}

void check(const std::vector<float>& out, std::size_t per, int n, int iteration, const char* name) {
  const std::size_t stride = out.size() > 4096 ? 4093 : 1;
  for (std::size_t i = 0; i < out.size(); i += stride) {
    const int owner = static_cast<int>(i / per);
    const float want = value(owner, iteration, i % per);
    if (owner < n && out[i] != want)
      throw std::runtime_error(std::string(name) + ": wrong result at element " + std::to_string(i) + ": " +
                               std::to_string(out[i]) + ", expected " + std::to_string(want));
  }
}

void measure(communicator& c, allreduce_algorithm algo, const char* name, std::size_t bytes) {
  const int n = c.size();
  const std::size_t per = bytes / sizeof(float) / static_cast<std::size_t>(n);
  const std::size_t total = per * static_cast<std::size_t>(n);
  std::vector<float> mine(per), out(total);
  const std::vector<std::size_t> counts(static_cast<std::size_t>(n), per);
  const int iterations =
      static_cast<int>(std::clamp<std::size_t>((512u << 20) / std::max<std::size_t>(bytes, 1), 5, 200));
  std::vector<double> times;
  for (int it = 0; it < 3 + iterations; ++it) {
    for (std::size_t i = 0; i < per; ++i) mine[i] = value(c.rank(), it, i);
    if (auto st = c.barrier(); !st.ok()) throw std::runtime_error("barrier: " + st.to_string());
    auto t0 = std::chrono::steady_clock::now();
    auto st = c.allgather(mine.data(), out.data(), counts, dtype::f32, algo);
    auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) throw std::runtime_error(std::string(name) + ": " + st.to_string());
    check(out, per, n, it, name);
    if (it >= 3) times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (auto st = c.allreduce(times.data(), times.size(), dtype::f64, reduce_op::max); !st.ok())
    throw std::runtime_error("allreduce max: " + st.to_string());
  std::sort(times.begin(), times.end());
  const std::size_t k = times.size();
  const double median = k % 2 ? times[k / 2] : 0.5 * (times[k / 2 - 1] + times[k / 2]);
  const double moved = static_cast<double>(n - 1) / n * static_cast<double>(total * sizeof(float)) / 1e9;
  if (c.rank() == 0) {
    std::printf("RESULT %s %d %zu %d %.1f %.1f %.3f %.3f\n", name, n, total * sizeof(float), iterations, median,
                times.front(), moved / (median * 1e-6), moved / (times.front() * 1e-6));
    std::fflush(stdout);
  }
}

}  // namespace

int run_allgather_bench(communicator& c, const std::vector<std::size_t>& sizes) {
  if (c.rank() == 0)
    std::printf("# chorus-bench allgather: N=%d streams=%d chunk_bytes=%zu hosts: %s; auto runs %s "
                "(chorus_allgather_tcp: CHORUS_HIERARCHICAL decides; chorus_hier_allgather_tcp / "
                "chorus_flat_allgather_tcp: forced on / off); busbw = (N-1)/N x result bytes / time\n",
                c.size(), c.num_streams(), c.options().chunk_bytes, c.hosts().describe().c_str(),
                name_of(c.choose_allgather(allreduce_algorithm::automatic)));
  for (auto bytes : sizes) {
    measure(c, allreduce_algorithm::automatic, "chorus_allgather_tcp", bytes);
    measure(c, allreduce_algorithm::hierarchical, "chorus_hier_allgather_tcp", bytes);
    measure(c, allreduce_algorithm::flat, "chorus_flat_allgather_tcp", bytes);
  }
  if (auto st = c.barrier(); !st.ok()) throw std::runtime_error("final barrier: " + st.to_string());
  return 0;
}

}  // namespace chorus::bench
