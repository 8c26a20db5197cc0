// chorus-testrank pipeline-psets-c: process sets through the C API (chorus.h only), N >= 3.
// chorus_init_with_process_sets registers A = ranks 0..N-2 (id 1) and B = ranks 1..N-1 (id 2);
// the queries answer for each; "g" is registered in A, in B and globally (three ids) and every
// rank allreduces it in each of its sets at once, exactly; rank 0 (outside B) gets
// CHORUS_ERR_INVALID_ARGUMENT at enqueue, its text naming the tensor and rank 0; barriers per set.
// Prints "pipeline-psets-c: all exact" (rank 0 also "outsider error: <text>").
// Exit codes: 0 pass, 1 wrong result, 2 usage, 3 an operation failed.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "chorus/chorus.h"

namespace chorus::testrank {

int run_pipeline_psets_c(int, char**) {
  const char* env_size = std::getenv("CHORUS_SIZE");
  const int n = env_size ? std::atoi(env_size) : 0;
  if (n < 3) return 2;
  std::vector<int> ranks, sizes = {n - 1, n - 1};
  for (int r = 0; r <= n - 2; ++r) ranks.push_back(r);
  for (int r = 1; r <= n - 1; ++r) ranks.push_back(r);
  if (chorus_init_with_process_sets(ranks.data(), sizes.data(), 2) != CHORUS_OK)
    return std::printf("init: %s\n", chorus_last_error()), 3;
  const int me = chorus_rank();
  int wrong = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) std::printf("pipeline-psets-c WRONG rank %d: %s\n", me, what.c_str()), ++wrong;
  };
  const bool in_a = me <= n - 2, in_b = me >= 1;
  expect(chorus_process_set_size(1) == n - 1 && chorus_process_set_size(2) == n - 1, "set sizes");
  expect(chorus_process_set_rank(1) == (in_a ? me : -1), "rank in A");
  expect(chorus_process_set_rank(2) == (in_b ? me - 1 : -1), "rank in B");
  expect(chorus_process_set_included(2) == (in_b ? 1 : 0) && chorus_process_set_included(7) == -1, "included");
  std::vector<int> got(static_cast<std::size_t>(n), -1);
  expect(chorus_process_set_ranks(2, got.data(), n) == n - 1 && got[0] == 1 && got[static_cast<std::size_t>(n - 2)] == n - 1,
         "ranks of B");

  // One name, three tensors: A's, B's and the job's, all in flight at once.
  const int64_t ids[] = {chorus_register("g"), chorus_register_in_process_set("g", 1), chorus_register_in_process_set("g", 2)};
  expect(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "one name in three sets gives three ids");
  const bool member[] = {true, in_a, in_b};
  const int64_t shape[] = {3};
  float data[3][3];
  int64_t handles[3] = {-1, -1, -1};
  for (int s = 0; s < 3; ++s) {
    if (!member[s]) continue;
    for (float& v : data[s]) v = static_cast<float>(me + 10 * s);
    handles[s] = chorus_enqueue_allreduce(ids[s], data[s], shape, 1, CHORUS_FLOAT32, CHORUS_OP_SUM, nullptr, nullptr);
    if (handles[s] < 0) return std::printf("enqueue %d: %s\n", s, chorus_last_error()), 3;
  }
  for (int s = 0; s < 3; ++s) {
    if (handles[s] < 0) continue;
    if (int st = chorus_wait(handles[s], 60000); st != CHORUS_OK)
      return std::printf("set %d: %s %s\n", s, chorus_status_name(st), chorus_error_string(handles[s])), 3;
    chorus_release(handles[s]);
    float want = 0;
    const int lo = s == 2 ? 1 : 0, hi = s == 1 ? n - 2 : n - 1;
    for (int r = lo; r <= hi; ++r) want += static_cast<float>(r + 10 * s);
    for (float v : data[s]) expect(v == want, "set " + std::to_string(s) + ": " + std::to_string(v) + " != " + std::to_string(want));
  }
  if (in_a) expect(chorus_barrier(1) == CHORUS_OK, "barrier in A");
  if (me == 0) {
    float x = 1;
    int64_t h = chorus_enqueue_allreduce(chorus_register_in_process_set("outsider", 2), &x, nullptr, 0, CHORUS_FLOAT32,
                                         CHORUS_OP_SUM, nullptr, nullptr);
    expect(h < 0, "an enqueue outside the set is refused");
    std::printf("outsider error: %s\n", chorus_last_error());
    expect(chorus_barrier(2) == CHORUS_ERR_INVALID_ARGUMENT, "a barrier outside the set is refused");
  }
  expect(chorus_barrier(0) == CHORUS_OK, "barrier");
  if (wrong) return 1;
  std::printf("pipeline-psets-c: all exact\n");
  std::fflush(stdout);
  chorus_shutdown();
  return 0;
}

}  // namespace chorus::testrank
