// chorus-testrank pipeline-join: Horovod's join with uneven inputs, through the C++ API. Rank r
// runs r + 1 steps (the last rank the most), then joins. In step k the ranks q >= k are still
// active and the joined ones take part with neutral data, so each active rank must get exactly:
// allreduce sum of (q+1)(k+1) and min of q+10 over active q; reducescatter (sum) of the active
// ranks' tensors. Allgather and alltoall are exact in step 0 and, as in Horovod, refused once a
// rank has joined: invalid_argument naming the tensor and the joined ranks, on every active
// rank, and the job goes on. join must end on every rank with last rank = size-1,
// and an allreduce afterwards needs every rank again. Prints "pipeline-join: all exact".
// Exit codes: 0 pass, 1 wrong result, 3 an operation failed, 4 an operation hung.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus::testrank {
namespace {

using namespace std::chrono_literals;

int stop(const std::string& what, const status& st) {
  std::printf("testrank error: %s: %s\n", what.c_str(), st.to_string().c_str());
  std::fflush(stdout);
  shutdown();
  return st.code() == errc::timeout ? 4 : 3;
}

template <class T>
std::vector<T> as(const std::vector<std::byte>& b) {
  std::vector<T> out(b.size() / sizeof(T));
  if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
  return out;
}

}  // namespace

int run_pipeline_join(int, char**) {
  if (auto st = init(); !st.ok()) return stop("init", st);
  const int rank = chorus::rank(), size = chorus::size();
  int wrong = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::printf("pipeline-join WRONG rank %d: %s\n", rank, what.c_str());
      ++wrong;
    }
  };
  for (int k = 0; k <= rank; ++k) {
    const std::string step = " step " + std::to_string(k);
    std::vector<float> sum(5, static_cast<float>((rank + 1) * (k + 1)));
    std::vector<int32_t> mn(3, rank + 10);
    std::vector<int64_t> rows(static_cast<std::size_t>(rank + 1) * 2, rank);
    const int64_t rs_rows = 2 * size + 1;
    std::vector<double> rs(static_cast<std::size_t>(rs_rows), rank + 1.0);
    std::vector<double> rs_out(static_cast<std::size_t>(reducescatter_rows(rs_rows, size, rank)), -1.0);
    std::vector<int32_t> a2a(static_cast<std::size_t>(size));
    for (int j = 0; j < size; ++j) a2a[static_cast<std::size_t>(j)] = rank * 100 + j;
    auto h_sum = allreduce_async("sum", {sum.data(), dtype::f32, {5}}, reduce_op::sum);
    auto h_min = allreduce_async("min", {mn.data(), dtype::i32, {3}}, reduce_op::min);
    auto h_ag = allgather_async("rows", {rows.data(), dtype::i64, {rank + 1, 2}});
    auto h_rs = reducescatter_async("rs", {rs.data(), dtype::f64, {rs_rows}},
                                    {rs_out.data(), dtype::f64, {static_cast<int64_t>(rs_out.size())}}, reduce_op::sum);
    auto h_a2a = alltoall_async("a2a", {a2a.data(), dtype::i32, {size}}, std::vector<int64_t>(size, 1));
    for (auto* h : {&h_sum, &h_min, &h_rs})
      if (auto st = h->wait(60s); !st.ok()) return stop(h->name() + step, st);
    // Ranks 0..k-1 have joined in step k.
    const std::string joined_text = k == 1 ? "rank 0 has joined" : "ranks 0-" + std::to_string(k - 1) + " have joined";
    for (auto* h : {&h_ag, &h_a2a}) {
      auto st = h->wait(60s);
      if (k == 0 && !st.ok()) return stop(h->name() + step, st);
      if (k == 0) continue;
      if (st.code() == errc::timeout) return stop(h->name() + step, st);
      expect(st.code() == errc::invalid_argument && st.message().find("'" + h->name() + "'") != std::string::npos &&
                 st.message().find(joined_text) != std::string::npos,
             h->name() + step + " while " + joined_text + " ended with: " + st.to_string());
    }
    float want_sum = 0, want_rs = 0;
    std::vector<int64_t> want_rows;
    std::vector<int32_t> want_a2a;
    std::vector<int64_t> want_splits;
    for (int q = k; q < size; ++q) {  // the ranks still active in step k
      want_sum += static_cast<float>((q + 1) * (k + 1));
      want_rs += static_cast<float>(q + 1);
      for (int i = 0; i < (q + 1) * 2; ++i) want_rows.push_back(q);
    }
    for (int q = 0; q < size; ++q) {
      want_splits.push_back(q >= k ? 1 : 0);
      if (q >= k) want_a2a.push_back(q * 100 + rank);
    }
    expect(sum == std::vector<float>(5, want_sum), "allreduce sum" + step);
    expect(mn == std::vector<int32_t>(3, k + 10), "allreduce min" + step);
    expect(rs_out == std::vector<double>(rs_out.size(), want_rs), "reducescatter" + step);
    if (k == 0) {
      expect(as<int64_t>(h_ag.gathered()) == want_rows, "allgather" + step);
      expect(as<int32_t>(h_a2a.gathered()) == want_a2a, "alltoall rows" + step);
      expect(h_a2a.received_splits() == want_splits, "alltoall received_splits" + step);
    }
  }
  auto joined = join_async();
  if (auto st = joined.wait(60s); !st.ok()) return stop("join", st);
  expect(joined.last_rank() == size - 1, "join returned " + std::to_string(joined.last_rank()));
  float one = 1;
  if (auto st = allreduce_async("after", {&one, dtype::f32, {}}, reduce_op::sum).wait(60s); !st.ok())
    return stop("after", st);
  expect(one == static_cast<float>(size), "allreduce after join");
  std::fflush(stdout);
  shutdown();
  if (wrong) return 1;
  std::printf("pipeline-join: all exact, last rank %d, on rank %d\n", size - 1, rank);
  std::fflush(stdout);
  return 0;
}

}  // namespace chorus::testrank
