// chorus-testrank modes that drive the whole pipeline through the C++ API (bindings/cpp):
//   pipeline-exact SEED [STEPS]   see pipeline_exact.cpp
//   pipeline-stall LATE SECS      LATE (e.g. "1,3") enqueue 'stall.grad' SECS seconds after the
//                                 others; the result must still be exact; "pipeline-stall done"
//   pipeline-mismatch             'mismatch.shape' differs on the last rank, 'mismatch.dtype' on
//                                 rank 0; prints "mismatch error: <status>" for each; the job goes on
//   pipeline-shutdown             ops only this rank enqueued (never agreed) + ops in flight, then
//                                 shutdown(): each ends once, with an error; "pipeline-shutdown ok"
//   pipeline-loop SECS            allreduces until SECS pass on rank 0's clock, "iteration N";
//                                 on an error prints "testrank error: <status>", shuts down, exits 3
//   pipeline-metrics STEPS STOPFILE  see pipeline_metrics.cpp (a job that waits to be scraped)
//   pipeline-c-api                reducescatter, alltoall, join and mismatches through the C API
//                                 (chorus.h); see pipeline_c_api.cpp
//   pipeline-ctrl-job GOFILE, pipeline-ctrl-intruder   an intruder on the control link; see
//                                 pipeline_intruder.cpp
// Exit codes: 0 pass, 1 wrong result, 2 usage, 3 an operation failed, 4 an operation hung.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.hpp"

namespace chorus::testrank {

/// pipeline-exact and pipeline-soak, in pipeline_exact.cpp.
int run_pipeline_exact(int argc, char** argv);
int run_pipeline_soak(int argc, char** argv);
/// pipeline-metrics, in pipeline_metrics.cpp.
int run_pipeline_metrics(int argc, char** argv);
/// pipeline-c-api, in pipeline_c_api.cpp.
int run_pipeline_c_api(int argc, char** argv);
/// pipeline-ctrl-job and pipeline-ctrl-intruder, in pipeline_intruder.cpp.
int run_ctrl_job(int argc, char** argv);
int run_ctrl_intruder();

/// Prints "testrank error: <st>", shuts chorus down, returns exit code 3 (also used by
/// pipeline_intruder.cpp).
int fail(const status& st) {
  std::printf("testrank error: %s\n", st.to_string().c_str());
  std::fflush(stdout);
  shutdown();
  return 3;
}

namespace {

using namespace std::chrono_literals;

int finish(int code) {
  std::fflush(stdout);
  shutdown();
  return code;
}

// ---- pipeline-stall ----------------------------------------------------------------------

int run_stall(int argc, char** argv) {
  if (argc < 4) return 2;
  std::set<int> late;
  for (const char* p = argv[2]; *p;) {
    late.insert(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  int late_seconds = std::atoi(argv[3]);
  if (auto st = init(); !st.ok()) return fail(st);
  const int rank = chorus::rank(), size = chorus::size();
  float warmup = 1;
  if (auto st = allreduce_async("stall.warmup", {&warmup, dtype::f32, {}}, reduce_op::sum).wait(30s); !st.ok())
    return fail(st);
  if (late.count(rank)) std::this_thread::sleep_for(std::chrono::seconds(late_seconds));
  std::vector<float> g(16, static_cast<float>(rank + 1));
  auto st = allreduce_async("stall.grad", {g.data(), dtype::f32, {16}}, reduce_op::sum).wait(60s);
  if (!st.ok()) return fail(st);
  for (float x : g)
    if (x != static_cast<float>(size * (size + 1) / 2)) {
      std::printf("pipeline-stall WRONG: %g\n", x);
      return finish(1);
    }
  std::printf("pipeline-stall done on rank %d\n", rank);
  return finish(0);
}

// ---- pipeline-mismatch -------------------------------------------------------------------

int run_mismatch() {
  if (auto st = init(); !st.ok()) return fail(st);
  const int rank = chorus::rank(), size = chorus::size();
  float before = 1, after = 2;
  if (auto st = allreduce_async("mismatch.before", {&before, dtype::f32, {}}, reduce_op::sum).wait(30s); !st.ok())
    return fail(st);
  std::vector<double> buf(12, 1.0);
  int64_t cols = rank == size - 1 ? 3 : 2;
  auto shape = allreduce_async("mismatch.shape", {buf.data(), dtype::f32, {4, cols}}, reduce_op::sum);
  auto type =
      allreduce_async("mismatch.dtype", {buf.data() + 8, rank == 0 ? dtype::f64 : dtype::f32, {2}}, reduce_op::sum);
  int errors = 0;
  for (auto* h : {&shape, &type}) {
    auto st = h->wait(30s);
    std::printf("mismatch error: %s\n", st.to_string().c_str());
    errors += st.code() == errc::mismatch;
  }
  if (auto st = allreduce_async("mismatch.after", {&after, dtype::f32, {}}, reduce_op::sum).wait(30s); !st.ok())
    return fail(st);
  if (errors != 2 || before != size || after != 2 * size) {
    std::printf("pipeline-mismatch WRONG: %d mismatch errors, before=%g after=%g\n", errors, before, after);
    return finish(1);
  }
  std::printf("pipeline-mismatch done on rank %d\n", rank);
  return finish(0);
}

// ---- pipeline-shutdown -------------------------------------------------------------------

int run_shutdown() {
  if (auto st = init(); !st.ok()) return fail(st);
  const int rank = chorus::rank();
  constexpr int local_ops = 20, inflight_ops = 8;
  // 1. Ops only this rank enqueues: they can never be agreed. Half handles, half callbacks.
  std::vector<float> local(local_ops * 64, 1.0f);
  std::vector<handle> handles;
  std::vector<std::atomic<int>> calls(local_ops + inflight_ops);
  std::vector<status> cb_status(local_ops + inflight_ops);
  auto callback_for = [&](int i) {
    return [&, i](const status& st) {
      cb_status[i] = st;
      calls[i].fetch_add(1, std::memory_order_release);
    };
  };
  for (int i = 0; i < local_ops; ++i) {
    std::string name = "pending.r" + std::to_string(rank) + "." + std::to_string(i);
    tensor_view v{local.data() + i * 64, dtype::f32, {64}};
    if (i % 2)
      allreduce_async(name, v, reduce_op::sum, callback_for(i));
    else
      handles.push_back(allreduce_async(name, v, reduce_op::sum));
  }
  // 2. A name that is pending is refused; a wait on a pending op times out and the op goes on.
  float dup = 0;
  auto again = allreduce_async("pending.r" + std::to_string(rank) + ".0", {&dup, dtype::f32, {}});
  std::printf("duplicate: %s\n", again.result().to_string().c_str());
  auto waited = handles[0].wait(100ms);
  std::printf("wait: %s\n", waited.to_string().c_str());
  bool boundary_ok =
      again.result().code() == errc::invalid_argument && waited.code() == errc::timeout && !handles[0].poll();
  // 3. Every rank got here; then ops in flight on all ranks while everyone shuts down.
  float sync = 1;
  if (auto st = allreduce_async("shutdown.sync", {&sync, dtype::f32, {}}, reduce_op::sum).wait(30s); !st.ok())
    return fail(st);
  std::vector<std::vector<float>> inflight(inflight_ops, std::vector<float>(1 << 18, 1.0f));
  for (int i = 0; i < inflight_ops; ++i)
    allreduce_async("inflight." + std::to_string(i), {inflight[i].data(), dtype::f32, {1 << 18}}, reduce_op::sum,
                    callback_for(local_ops + i));
  shutdown();
  std::this_thread::sleep_for(200ms);  // a second call back would show up here

  // 4. Each op ended exactly once; those never agreed ended with an error.
  int errors = 0, ok = 0, wrong = 0;
  std::string codes;
  for (auto& h : handles) {
    if (!h.poll())
      ++wrong;
    else if (h.result().ok())
      ++wrong;
    else
      ++errors, codes += std::string(" ") + to_string(h.result().code());
  }
  for (int i = 0; i < local_ops + inflight_ops; ++i) {
    if (i < local_ops && i % 2 == 0) continue;
    int n = calls[i].load(std::memory_order_acquire);
    if (n != 1) {
      std::printf("op %d called back %d times\n", i, n);
      ++wrong;
    } else if (cb_status[i].ok()) {
      ok += i >= local_ops;
      wrong += i < local_ops;
    } else {
      ++errors, codes += std::string(" ") + to_string(cb_status[i].code());
    }
  }
  float late = 0;
  auto after = allreduce_async("after.shutdown", {&late, dtype::f32, {}});
  std::printf("after shutdown: %s\n", after.result().to_string().c_str());
  if (after.result().code() != errc::shutdown) ++wrong;
  std::printf("pipeline-shutdown %s rank=%d errors=%d inflight_ok=%d wrong=%d codes:%s\n",
              wrong == 0 && boundary_ok ? "ok" : "WRONG", rank, errors, ok, wrong, codes.c_str());
  return finish(wrong == 0 && boundary_ok ? 0 : 1);
}

// ---- pipeline-loop -----------------------------------------------------------------------

int run_loop(int argc, char** argv) {
  if (argc < 3) return 2;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[2]));
  if (auto st = init(); !st.ok()) return fail(st);
  const int rank = chorus::rank(), size = chorus::size();
  std::vector<std::vector<float>> bufs;
  for (int t = 0; t < 6; ++t) bufs.emplace_back(std::size_t{4096} << t);
  for (int it = 0;; ++it) {
    // Rank 0's clock decides when to stop, so every rank runs the same iterations.
    int32_t stop = rank == 0 && std::chrono::steady_clock::now() >= end;
    if (auto st = broadcast_async("loop.stop", {&stop, dtype::i32, {}}, 0).wait(20s); !st.ok()) return fail(st);
    if (stop) break;
    std::vector<handle> hs;
    for (std::size_t t = 0; t < bufs.size(); ++t) {
      std::fill(bufs[t].begin(), bufs[t].end(), static_cast<float>(rank + it % 7));
      hs.push_back(allreduce_async("loop." + std::to_string(t),
                                   {bufs[t].data(), dtype::f32, {static_cast<int64_t>(bufs[t].size())}},
                                   reduce_op::sum));
    }
    for (std::size_t t = 0; t < hs.size(); ++t) {
      auto st = hs[t].wait(20s);
      if (!st.ok()) return fail(st);
      float want = static_cast<float>(size * (size - 1) / 2 + size * (it % 7));
      if (bufs[t].front() != want || bufs[t].back() != want) {
        std::printf("pipeline-loop WRONG iteration %d: %g, expected %g\n", it, bufs[t].front(), want);
        return finish(1);
      }
    }
    std::printf("iteration %d\n", it);
    std::fflush(stdout);
  }
  return finish(0);
}

}  // namespace

/// Runs one of the pipeline modes above; argv[1] is the mode. Returns the exit code (2 for an
/// unknown mode or missing arguments).
int run_pipeline_mode(const std::string& mode, int argc, char** argv) {
  int rc = 2;
  if (mode == "pipeline-exact")
    rc = run_pipeline_exact(argc, argv);
  else if (mode == "pipeline-soak")
    rc = run_pipeline_soak(argc, argv);
  else if (mode == "pipeline-stall")
    rc = run_stall(argc, argv);
  else if (mode == "pipeline-mismatch")
    rc = run_mismatch();
  else if (mode == "pipeline-shutdown")
    rc = run_shutdown();
  else if (mode == "pipeline-loop")
    rc = run_loop(argc, argv);
  else if (mode == "pipeline-metrics")
    rc = run_pipeline_metrics(argc, argv);
  else if (mode == "pipeline-c-api")
    rc = run_pipeline_c_api(argc, argv);
  else if (mode == "pipeline-ctrl-job")
    rc = run_ctrl_job(argc, argv);
  else if (mode == "pipeline-ctrl-intruder")
    rc = run_ctrl_intruder();
  if (rc == 2)
    std::fprintf(stderr,
                 "usage: chorus-testrank pipeline-exact SEED [STEPS] | pipeline-soak OPS [SEED] | pipeline-stall LATE_RANKS SECS | "
                 "pipeline-mismatch | pipeline-shutdown | pipeline-loop SECS | pipeline-metrics STEPS STOPFILE | "
                 "pipeline-c-api | pipeline-ctrl-job GOFILE | pipeline-ctrl-intruder\n");
  return rc;
}

}  // namespace chorus::testrank
