// chorus-testrank mode for a rank killed under load (tests/multiproc/pipeline_failure_test.cpp):
//   pipeline-kill-loop SECS   two generations of allreduces always in flight (one being
//                             negotiated while the other runs on the data plane); prints
//                             "iteration N". Once any op fails it waits for every op still
//                             pending, prints "op error: <status>" for each (or "op hung: NAME"),
//                             enqueues one more op and prints "late op error: <status>", then
//                             "testrank error: <first status>", shuts down and exits 3.
// Exit codes: 0 pass (SECS passed without a failure), 1 wrong result, 2 usage, 3 an op failed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus::testrank {

namespace {

using namespace std::chrono_literals;

constexpr int tensors_per_generation = 8;

struct generation {
  std::vector<std::vector<float>> bufs;
  std::vector<handle> handles;
  std::vector<std::string> names;
  int iteration = -1;
};

/// Sizes from 64 floats to 256 Ki floats: small ones fuse, large ones span several chunks
/// (and so several streams).
std::size_t elements_of(int t) { return std::size_t{64} << (2 * (t % 7)); }

}  // namespace

/// pipeline-kill-loop SECS
int run_pipeline_kill_loop(int argc, char** argv) {
  if (argc < 3) return 2;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[2]));
  if (auto st = init(); !st.ok()) {
    std::printf("testrank error: %s\n", st.to_string().c_str());
    std::fflush(stdout);
    return 3;
  }
  const int rank = chorus::rank(), size = chorus::size();
  generation gens[2];
  for (auto& g : gens)
    for (int t = 0; t < tensors_per_generation; ++t) g.bufs.emplace_back(elements_of(t));

  auto launch = [&](generation& g, int it) {
    g.iteration = it;
    g.handles.clear();
    g.names.clear();
    for (int t = 0; t < tensors_per_generation; ++t) {
      auto& b = g.bufs[static_cast<std::size_t>(t)];
      std::fill(b.begin(), b.end(), static_cast<float>(rank + it % 7));
      g.names.push_back("kill." + std::to_string(it % 2) + "." + std::to_string(t));
      g.handles.push_back(allreduce_async(g.names.back(), {b.data(), dtype::f32, {static_cast<int64_t>(b.size())}},
                                          reduce_op::sum));
    }
  };

  std::optional<status> first;
  int it = 0;
  launch(gens[0], it);
  for (;; ++it) {
    // The next generation is in negotiation while this one finishes. SECS is a safety bound
    // (the test kills a rank long before it passes).
    bool stop = std::chrono::steady_clock::now() >= end;
    if (!stop) launch(gens[(it + 1) % 2], it + 1);
    auto& g = gens[it % 2];
    for (std::size_t t = 0; t < g.handles.size(); ++t) {
      auto st = g.handles[t].wait(20s);
      if (!st.ok()) {
        first = st;
        break;
      }
      float want = static_cast<float>(size * (size - 1) / 2 + size * (g.iteration % 7));
      if (g.bufs[t].front() != want || g.bufs[t].back() != want) {
        std::printf("pipeline-kill-loop WRONG iteration %d: %g, expected %g\n", g.iteration, g.bufs[t].front(), want);
        std::fflush(stdout);
        shutdown();
        return 1;
      }
    }
    if (first) break;
    std::printf("iteration %d\n", it);
    std::fflush(stdout);
    if (stop) {
      std::fflush(stdout);
      shutdown();
      return 0;
    }
  }

  // Every op still pending on this rank must end, each with its own error.
  int hung = 0;
  for (auto& g : gens)
    for (std::size_t t = 0; t < g.handles.size(); ++t) {
      auto st = g.handles[t].wait(15s);
      if (st.code() == errc::timeout) {
        std::printf("op hung: %s\n", g.names[t].c_str());
        ++hung;
      } else if (!st.ok()) {
        std::printf("op error: %s\n", st.to_string().c_str());
      }
    }
  float late = 1;
  auto late_st = allreduce_async("kill.late", {&late, dtype::f32, {}}, reduce_op::sum).wait(15s);
  std::printf("late op error: %s\n", late_st.to_string().c_str());
  std::printf("testrank error: %s\n", first->to_string().c_str());
  std::printf("ops hung: %d\n", hung);
  std::fflush(stdout);
  shutdown();
  return 3;
}

}  // namespace chorus::testrank
