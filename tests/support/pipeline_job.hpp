// A job of real pipelines over real communicators (TCP data plane and control link on
// 127.0.0.1) with every rank in this one test process, one thread per rank: start and stop,
// a bounded waiter for one op, and steps run on every rank at once. Every wait has a hard bound.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/pipeline.hpp"
#include "runtime/collectives/communicator.hpp"
#include "tests/support/rendezvous_env.hpp"
#include "tests/support/test_time.hpp"

namespace chorus::testing {

using namespace std::chrono_literals;

struct rank_job {
  std::unique_ptr<communicator> comm;
  std::unique_ptr<pipeline> pipe;
};

/// Starts `n` ranks (communicator + pipeline each) in parallel threads; `observer_of_rank`
/// (optional) gives each rank its own telemetry observer; `copts`, the communicators' options.
inline std::vector<rank_job> start_job(int n, pipeline_options opts = {},
                                       std::function<std::shared_ptr<telemetry::observer>(int)> observer_of_rank = {},
                                       collective_options copts = {}) {
  uint16_t port = n > 1 ? free_rendezvous_port() : 0;
  std::vector<rank_job> jobs(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      process_env env = rendezvous_env(r, n, port, 20s);
      mesh::mesh_options t;
      t.connect_timeout = 20s;
      auto joined = communicator::connect(env, t, copts);
      if (!joined) {
        errors[r] = joined.error().to_string();
        return;
      }
      auto& comm = joined->comm;
      auto o = opts;
      o.connect_timeout = 20s;
      if (observer_of_rank) o.observer = observer_of_rank(r);
      auto pipe = pipeline::start(*comm, std::move(joined->control), o);
      if (!pipe) {
        errors[r] = pipe.error().to_string();
        comm->close();
        return;
      }
      jobs[r].comm = std::move(comm);
      jobs[r].pipe = std::move(*pipe);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return jobs;
}

inline void stop_job(std::vector<rank_job>& jobs) {
  std::vector<std::thread> threads;
  for (auto& j : jobs)
    threads.emplace_back([&j] {
      if (j.pipe) j.pipe->shutdown();
      j.pipe.reset();
      if (j.comm) j.comm->close();
      j.comm.reset();
    });
  for (auto& t : threads) t.join();
}

/// Collects one op's outcome; wait() is bounded.
struct waiter {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  status result;
  std::vector<std::byte> gathered;
  std::vector<int64_t> dims;
  auto callback() {
    return [this](const status& st, std::vector<std::byte> g, std::vector<int64_t> d) {
      std::lock_guard lk(mu);
      ++calls;
      result = st;
      gathered = std::move(g);
      dims = std::move(d);
      cv.notify_all();
    };
  }
  /// Scaled like every bound (test_time.hpp): under TSan a test's cycle time alone may pass 20 s.
  bool wait(std::chrono::milliseconds t = 20s) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, scaled(t), [&] { return calls > 0; });
  }
};

inline tensor_spec make(std::string name, collective_kind k, dtype t, std::vector<int64_t> shape, reduce_op op = reduce_op::sum,
                        int root = -1) {
  return tensor_spec{std::move(name), k, t, std::move(shape), op, root, device_kind::cpu, 0};
}

/// `n` steps of one 1 MiB allreduce of ones on every rank at once (each element sums to the
/// job's size), named `name` + step; expects every result exact.
inline void steps_of_ones(std::vector<rank_job>& job, const std::string& name, int n = 1) {
  const auto size = static_cast<int>(job.size());
  for (int k = 0; k < n; ++k) {
    std::vector<std::thread> threads;
    std::vector<int> bad(job.size(), 0);
    for (int r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        std::vector<float> g(1 << 18, 1.0f);
        waiter w;
        job[r].pipe->enqueue({make(name + std::to_string(k), collective_kind::allreduce, dtype::f32, {1 << 18}),
                              g.data(), g.data(), w.callback()});
        if (!w.wait() || !w.result.ok() || g.front() != float(size) || g.back() != float(size)) ++bad[r];
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(bad, std::vector<int>(job.size(), 0)) << name << k;
  }
}

/// Calls `fn` on every rank's pipeline at once (collective calls such as hold_autotune); the
/// failures, "rank R: status" each, empty when every rank succeeded.
inline std::string on_every_rank(std::vector<rank_job>& job, const std::function<status(pipeline&)>& fn) {
  std::vector<status> out(job.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < job.size(); ++r) threads.emplace_back([&, r] { out[r] = fn(*job[r].pipe); });
  for (auto& t : threads) t.join();
  std::string failures;
  for (std::size_t r = 0; r < out.size(); ++r)
    if (!out[r].ok()) failures += "rank " + std::to_string(r) + ": " + out[r].to_string() + "; ";
  return failures;
}

}  // namespace chorus::testing
