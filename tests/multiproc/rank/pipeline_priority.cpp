// chorus-testrank pipeline-priority: a late tensor of larger priority overtakes a big bucket of
// priority 0 (tests/multiproc/pipeline_priority_trace_test.cpp runs it with one stream, one chunk in
// flight and a start window of one, on TCP only). Every rank:
//  1. enqueues "prio.big" (64 MiB, priority 0, 256 chunks);
//  2. reduces "prio.gate" (priority 50) and waits for it: once it ended, the big one was agreed;
//  3. enqueues "prio.first" (1 MiB, priority 100) and waits for it, noting whether "prio.big"
//     was still pending when it was enqueued and when it ended.
// With priority off, the first tensor's chunk is handed out only after the big bucket's last
// chunk ended, so it can never end first. Prints "pipeline-priority: big pending at enqueue
// yes|no" and "pipeline-priority: first ended before big yes|no", then checks every result.
// Exit codes: 0 pass, 1 wrong result, 3 an operation failed.
#include <chrono>
#include <cstdio>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus::testrank {

int fail(const status& st);  // pipeline_modes.cpp

int run_pipeline_priority(int, char**) {
  using namespace std::chrono_literals;
  if (auto st = init(); !st.ok()) return fail(st);
  const int rank = chorus::rank(), size = chorus::size();
  std::vector<float> big(std::size_t{16} << 20, static_cast<float>(rank + 1));
  std::vector<float> first(std::size_t{256} << 10, static_cast<float>(rank));
  float gate = 1.0f;
  auto sum_of = [&](int add) { return static_cast<float>(size * (size - 1) / 2 + size * add); };
  auto h_big = allreduce_async(with_priority("prio.big", 0),
                               {big.data(), dtype::f32, {static_cast<int64_t>(big.size())}}, reduce_op::sum);
  if (auto st = allreduce_async(with_priority("prio.gate", 50), {&gate, dtype::f32, {}}, reduce_op::sum).wait(60s);
      !st.ok())
    return fail(st);
  const bool pending = !h_big.poll();
  auto h_first = allreduce_async(with_priority("prio.first", 100),
                                 {first.data(), dtype::f32, {static_cast<int64_t>(first.size())}}, reduce_op::sum);
  if (auto st = h_first.wait(60s); !st.ok()) return fail(st);
  const bool before = !h_big.poll();
  if (auto st = h_big.wait(60s); !st.ok()) return fail(st);
  std::printf("pipeline-priority: big pending at enqueue %s\n", pending ? "yes" : "no");
  std::printf("pipeline-priority: first ended before big %s\n", before ? "yes" : "no");
  int code = 0;
  if (gate != static_cast<float>(size) || first.front() != sum_of(0) || first.back() != sum_of(0) ||
      big.front() != sum_of(1) || big.back() != sum_of(1)) {
    std::printf("pipeline-priority WRONG: gate %g first %g big %g\n", gate, first.back(), big.back());
    code = 1;
  }
  std::fflush(stdout);
  shutdown();
  return code;
}

}  // namespace chorus::testrank
