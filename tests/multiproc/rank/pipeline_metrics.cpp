// chorus-testrank pipeline-metrics STEPS STOPFILE: a job to scrape. Each step allreduces one
// 16 MiB tensor (in place, chunks over every stream) and five small ones (one fused bucket),
// checking the sums; then prints "pipeline-metrics ready ops=N" (N = ops this rank ran) and
// keeps the job, and so its metrics endpoint, up until STOPFILE exists (at most 120 s).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus::testrank {

int run_pipeline_metrics(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc < 4) return 2;
  const int steps = std::atoi(argv[2]);
  const std::string stop_file = argv[3];
  auto failed = [](const status& st) {
    std::printf("testrank error: %s\n", st.to_string().c_str());
    std::fflush(stdout);
    shutdown();
    return 3;
  };
  if (auto st = init(); !st.ok()) return failed(st);
  const int rank = chorus::rank(), size = chorus::size();
  std::vector<std::vector<float>> bufs;
  bufs.emplace_back(std::size_t{4} << 20);
  for (int t = 0; t < 5; ++t) bufs.emplace_back(std::size_t{1000} * (t + 1));
  int ops = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<handle> hs;
    for (std::size_t t = 0; t < bufs.size(); ++t) {
      std::fill(bufs[t].begin(), bufs[t].end(), static_cast<float>(rank + step));
      hs.push_back(allreduce_async("metrics." + std::to_string(t),
                                   {bufs[t].data(), dtype::f32, {static_cast<int64_t>(bufs[t].size())}},
                                   reduce_op::sum));
    }
    for (std::size_t t = 0; t < hs.size(); ++t) {
      if (auto st = hs[t].wait(30s); !st.ok()) return failed(st);
      float want = static_cast<float>(size * (size - 1) / 2 + size * step);
      if (bufs[t].front() != want || bufs[t].back() != want) {
        std::printf("pipeline-metrics WRONG step %d: %g, expected %g\n", step, bufs[t].front(), want);
        std::fflush(stdout);
        shutdown();
        return 1;
      }
      ++ops;
    }
  }
  std::printf("pipeline-metrics ready ops=%d rank=%d\n", ops, rank);
  std::fflush(stdout);
  auto deadline = std::chrono::steady_clock::now() + 120s;
  while (::access(stop_file.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  shutdown();
  std::printf("pipeline-metrics done on rank %d\n", rank);
  std::fflush(stdout);
  return 0;
}

}  // namespace chorus::testrank
