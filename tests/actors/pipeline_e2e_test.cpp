// The real pipeline over real communicators (TCP data plane and control link on 127.0.0.1),
// with every rank of the job in this one process, one thread per rank. Every wait has a hard
// bound (tests/support/pipeline_job.hpp). The tunables and the autotuner's hold are in
// pipeline_tunables_test.cpp; the multi-process tests of the APIs (tests/multiproc) complement these.
#include "actors/pipeline.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "runtime/collectives/communicator.hpp"
#include "runtime/fusion/resnet50_sizes.hpp"
#include "telemetry/observer_slot.hpp"
#include "tests/support/pipeline_job.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace chorus::testing;

TEST(pipeline_e2e, one_rank_allreduce_is_the_identity) {
  auto job = start_job(1);
  ASSERT_TRUE(job[0].pipe);
  std::vector<float> v{1, 2, 3};
  waiter w;
  job[0].pipe->enqueue({make("x", collective_kind::allreduce, dtype::f32, {3}), v.data(), v.data(), w.callback()});
  ASSERT_TRUE(w.wait());
  EXPECT_TRUE(w.result.ok()) << w.result.to_string();
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  auto st = job[0].pipe->stats();
  EXPECT_EQ(st.negotiation.agreed_ops, 1u);
  stop_job(job);
}

TEST(pipeline_e2e, two_ranks_reduce_broadcast_and_gather_exactly) {
  pipeline_options o;
  o.fusion_threshold = 1 << 16;
  o.chunk_bytes = 1 << 14;
  auto job = start_job(2, o);
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  const int tensors = 40;
  std::vector<std::vector<std::vector<float>>> data(2);
  std::vector<std::vector<std::unique_ptr<waiter>>> waits(2);
  std::vector<std::vector<float>> rows(2), bc(2);
  std::vector<waiter> gw(2), bw(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    for (int t = 0; t < tensors; ++t) {
      std::size_t n = static_cast<std::size_t>(1) << (t % 16);  // 1 element .. 128 KiB
      data[r].emplace_back(n);
      for (std::size_t k = 0; k < n; ++k) data[r][t][k] = static_cast<float>(r + 1) * static_cast<float>(k % 97);
      waits[r].push_back(std::make_unique<waiter>());
    }
    rows[r].assign(static_cast<std::size_t>(r + 1) * 2, static_cast<float>(10 * r));
    bc[r].assign(1000, static_cast<float>(r == 1 ? 7 : -1));
  }
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto& p = *job[r].pipe;
      for (int i = 0; i < tensors; ++i) {
        int t = r == 0 ? i : tensors - 1 - i;  // opposite orders
        auto& v = data[r][t];
        p.enqueue({make("g" + std::to_string(t), collective_kind::allreduce, dtype::f32, {static_cast<int64_t>(v.size())}),
                   v.data(), v.data(), waits[r][t]->callback()});
      }
      p.enqueue({make("rows", collective_kind::allgather, dtype::f32, {r + 1, 2}), rows[r].data(), nullptr, gw[r].callback()});
      p.enqueue({make("bc", collective_kind::broadcast, dtype::f32, {1000}, reduce_op::sum, 1), bc[r].data(), bc[r].data(),
                 bw[r].callback()});
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    for (int t = 0; t < tensors; ++t) {
      ASSERT_TRUE(waits[r][t]->wait()) << "g" << t << " on rank " << r << " never ended";
      ASSERT_TRUE(waits[r][t]->result.ok()) << waits[r][t]->result.to_string();
      EXPECT_EQ(waits[r][t]->calls, 1);
      for (std::size_t k = 0; k < data[r][t].size(); ++k)
        ASSERT_EQ(data[r][t][k], 3.0f * static_cast<float>(k % 97)) << "g" << t << "[" << k << "] rank " << r;
    }
    ASSERT_TRUE(gw[r].wait());
    ASSERT_TRUE(gw[r].result.ok()) << gw[r].result.to_string();
    EXPECT_EQ(gw[r].dims, (std::vector<int64_t>{1, 2}));
    std::vector<float> want{0, 0, 10, 10, 10, 10};
    ASSERT_EQ(gw[r].gathered.size(), want.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(gw[r].gathered.data(), want.data(), gw[r].gathered.size()), 0);
    ASSERT_TRUE(bw[r].wait());
    ASSERT_TRUE(bw[r].result.ok()) << bw[r].result.to_string();
    EXPECT_EQ(bc[r], std::vector<float>(1000, 7.0f));
  }
  auto st = job[0].pipe->stats();
  EXPECT_EQ(st.negotiation.agreed_ops, static_cast<uint64_t>(tensors + 2));
  EXPECT_EQ(st.streams.size(), static_cast<std::size_t>(job[0].comm->num_streams()));
  std::cout << "negotiation p50=" << st.negotiation.p50_us << "us p99=" << st.negotiation.p99_us
            << "us cycles=" << st.negotiation.cycles << " messages=" << st.negotiation.messages_sent << "\n";
  stop_job(job);
}

class pipeline_e2e_ranks : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(pipeline_e2e_ranks, every_rank_gets_exact_sums_in_its_own_enqueue_order) {
  auto [n, strategy] = GetParam();
  pipeline_options o;
  o.negotiation = strategy;
  o.fusion_threshold = 1 << 15;
  o.chunk_bytes = 1 << 13;
  auto job = start_job(n, o);
  for (auto& j : job) ASSERT_TRUE(j.pipe);
  const int tensors = 30;
  std::vector<int> bad(static_cast<std::size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::vector<std::vector<double>> g(tensors);
      std::vector<std::unique_ptr<waiter>> ws(tensors);
      for (int i = 0; i < tensors; ++i) {
        int t = (i * 7 + r * 11) % tensors;  // a different order on every rank
        g[t].assign(static_cast<std::size_t>(t * 97 + 1), static_cast<double>(r + t));
        ws[t] = std::make_unique<waiter>();
        job[r].pipe->enqueue({make("t" + std::to_string(t), collective_kind::allreduce, dtype::f64,
                                   {static_cast<int64_t>(g[t].size())}),
                              g[t].data(), g[t].data(), ws[t]->callback()});
      }
      for (int t = 0; t < tensors; ++t) {
        double want = n * t + n * (n - 1) / 2.0;
        if (!ws[t]->wait() || !ws[t]->result.ok() || ws[t]->calls != 1) ++bad[r];
        for (double x : g[t])
          if (x != want) {
            ++bad[r];
            break;
          }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, std::vector<int>(static_cast<std::size_t>(n), 0));
  stop_job(job);
}

INSTANTIATE_TEST_SUITE_P(all, pipeline_e2e_ranks,
                         ::testing::Values(std::tuple{3, std::string("gossip")}, std::tuple{4, std::string("gossip")},
                                           std::tuple{3, std::string("central")}),
                         [](const auto& info) {
                           return std::get<1>(info.param) + "_" + std::to_string(std::get<0>(info.param));
                         });

TEST(pipeline_e2e, back_to_back_small_allreduces_report_negotiation_latency) {
  pipeline_options o;
  o.cycle_time = std::chrono::microseconds(0);
  auto job = start_job(2, o);
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  const int rounds = 200;
  std::vector<std::thread> threads;
  std::vector<int> bad(2, 0);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> v(256);
      for (int i = 0; i < rounds; ++i) {
        std::fill(v.begin(), v.end(), 1.0f);
        waiter w;
        job[r].pipe->enqueue({make("step", collective_kind::allreduce, dtype::f32, {256}), v.data(), v.data(), w.callback()});
        if (!w.wait() || !w.result.ok() || v[0] != 2.0f) ++bad[r];
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, (std::vector<int>{0, 0}));
  auto st = job[0].pipe->stats();
  EXPECT_EQ(st.negotiation.agreed_ops, static_cast<uint64_t>(rounds));
  std::cout << "enqueue->agreed over " << st.negotiation.samples << " ops: p50=" << st.negotiation.p50_us
            << "us p99=" << st.negotiation.p99_us << "us cycles=" << st.negotiation.cycles << "\n";
  stop_job(job);
}

TEST(pipeline_e2e, resnet50_step_is_exact_and_reports_time_against_bare_collectives) {
  auto job = start_job(2);
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  using clock = std::chrono::steady_clock;
  std::vector<std::vector<std::vector<float>>> grads(2);
  for (int r = 0; r < 2; ++r)
    for (auto n : resnet50_sizes) grads[r].emplace_back(n, static_cast<float>(r + 1));
  std::vector<double> pipe_ms(2), bare_ms(2);
  std::vector<int> wrong(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      for (int step = 0; step < 3; ++step) {  // the first step also fills the buffer pool
        auto t0 = clock::now();
        std::vector<std::unique_ptr<waiter>> ws;
        for (std::size_t i = resnet50_sizes.size(); i-- > 0;) {  // backward order
          auto& g = grads[r][i];
          if (step > 0) std::fill(g.begin(), g.end(), static_cast<float>(r + 1));
          ws.push_back(std::make_unique<waiter>());
          job[r].pipe->enqueue({make("p" + std::to_string(i), collective_kind::allreduce, dtype::f32,
                                     {static_cast<int64_t>(g.size())}, reduce_op::average),
                                g.data(), g.data(), ws.back()->callback()});
        }
        for (auto& w : ws)
          if (!w->wait(60s) || !w->result.ok()) ++wrong[r];
        pipe_ms[r] = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
        if (r == 0) std::cout << "step " << step << ": " << pipe_ms[r] << " ms\n";
      }
      for (auto& g : grads[r])
        for (float x : g)
          if (x != 1.5f) {
            ++wrong[r];
            break;
          }
      std::vector<float> flat(resnet50_parameter_count, 1.0f);  // the same bytes, one bare allreduce
      auto t1 = clock::now();
      EXPECT_TRUE(job[r].comm->allreduce(flat.data(), flat.size(), dtype::f32, reduce_op::average).ok());
      bare_ms[r] = std::chrono::duration<double, std::milli>(clock::now() - t1).count();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, (std::vector<int>{0, 0}));
  std::cout << "resnet50 step: pipeline " << pipe_ms[0] << " ms, bare allreduce " << bare_ms[0] << " ms\n";
  stop_job(job);
}

/// Counts what the actors report to telemetry (calls come from several actor threads).
struct counting_observer : telemetry::observer {
  std::mutex mu;
  std::map<std::string, int> events;
  std::set<uint64_t> enqueued, ready, called;
  std::set<std::string> agreed, bucketed;
  std::map<uint64_t, int> chunk_starts, chunk_ends;
  int64_t max_agree_us = -1;
  int64_t min_callback_us = -1;
  void count(const char* what) { ++events[what]; }
  void on_enqueue(uint64_t h, const tensor_spec&, telemetry::time_point) override {
    std::lock_guard lk(mu);
    count("enqueue");
    enqueued.insert(h);
  }
  void on_callback(uint64_t h, const tensor_spec&, const status& r, telemetry::time_point e,
                   telemetry::time_point at) override {
    std::lock_guard lk(mu);
    count(r.ok() ? "callback_ok" : "callback_error");
    called.insert(h);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(at - e).count();
    if (min_callback_us < 0 || us < min_callback_us) min_callback_us = us;
  }
  void on_ready(uint64_t h, const tensor_spec&, uint64_t cycle, telemetry::time_point) override {
    std::lock_guard lk(mu);
    count(cycle >= 1 ? "ready" : "ready_bad_cycle");
    ready.insert(h);
  }
  void on_gossip_sent(int to, std::span<const uint8_t> b, telemetry::time_point) override {
    std::lock_guard lk(mu);
    count(to >= 0 && !b.empty() ? "gossip_sent" : "gossip_sent_bad");
  }
  void on_gossip_received(std::span<const uint8_t> b, telemetry::time_point) override {
    std::lock_guard lk(mu);
    count(!b.empty() ? "gossip_received" : "gossip_received_bad");
  }
  void on_cycle(const telemetry::cycle_event& c) override {
    std::lock_guard lk(mu);
    count(c.finished >= c.started ? "cycle" : "cycle_bad");
  }
  void on_agreed(uint64_t, std::span<const std::string> names, std::span<const std::chrono::microseconds> lat,
                 telemetry::time_point) override {
    std::lock_guard lk(mu);
    count(names.size() == lat.size() ? "agreed" : "agreed_bad");
    for (auto& n : names) agreed.insert(n);
    for (auto l : lat) max_agree_us = std::max<int64_t>(max_agree_us, l.count());
  }
  void on_bucket(const telemetry::bucket_event& b, telemetry::time_point) override {
    std::lock_guard lk(mu);
    count(b.chunks > 0 && !b.tensors.empty() ? "bucket" : "bucket_bad");
    for (auto& n : b.tensors) bucketed.insert(n);
  }
  void on_chunk_start(int, uint64_t seq, std::size_t, telemetry::time_point) override {
    std::lock_guard lk(mu);
    ++chunk_starts[seq];
  }
  void on_chunk_end(int, uint64_t seq, std::size_t, const status& r, telemetry::time_point s,
                    telemetry::time_point at) override {
    std::lock_guard lk(mu);
    if (r.ok() && at >= s) ++chunk_ends[seq];
  }
  void on_tunables(const telemetry::tunables& t, telemetry::time_point) override {
    std::lock_guard lk(mu);
    count(t.streams >= 1 && t.chunk_bytes > 0 ? "tunables" : "tunables_bad");
  }
};

TEST(pipeline_e2e, the_actors_report_every_op_cycle_bucket_and_chunk_to_telemetry) {
  pipeline_options o;
  o.fusion_threshold = 1 << 16;
  o.chunk_bytes = 1 << 14;
  std::vector<std::shared_ptr<counting_observer>> obs{std::make_shared<counting_observer>(),
                                                       std::make_shared<counting_observer>()};
  auto job = start_job(2, o, [&](int r) { return obs[static_cast<std::size_t>(r)]; });
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  const int tensors = 12;
  std::vector<std::thread> threads;
  std::vector<int> bad(2, 0);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::vector<std::vector<float>> g(tensors);
      std::vector<std::unique_ptr<waiter>> ws;
      for (int t = 0; t < tensors; ++t) {
        g[t].assign(static_cast<std::size_t>(1) << (t + 4), 1.0f);  // 64 B .. 128 KiB
        ws.push_back(std::make_unique<waiter>());
        job[r].pipe->enqueue({make("t" + std::to_string(t), collective_kind::allreduce, dtype::f32,
                                   {static_cast<int64_t>(g[t].size())}),
                              g[t].data(), g[t].data(), ws.back()->callback()});
      }
      for (auto& w : ws)
        if (!w->wait() || !w->result.ok()) ++bad[r];
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, (std::vector<int>{0, 0}));
  stop_job(job);  // callbacks have run; the last on_callback follows its done callback
  for (int r = 0; r < 2; ++r) {
    auto& b = *obs[static_cast<std::size_t>(r)];
    std::lock_guard lk(b.mu);
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(b.events["enqueue"], tensors);
    EXPECT_EQ(b.events["ready"], tensors);
    EXPECT_EQ(b.events["callback_ok"], tensors);
    EXPECT_EQ(b.enqueued, b.ready);
    EXPECT_EQ(b.enqueued, b.called);
    EXPECT_EQ(b.agreed.size(), static_cast<std::size_t>(tensors));
    EXPECT_EQ(b.agreed, b.bucketed);
    EXPECT_GE(b.events["cycle"], 1);
    EXPECT_GE(b.events["agreed"], 1);
    EXPECT_GE(b.events["bucket"], 1);
    EXPECT_GE(b.events["gossip_sent"], 1);
    EXPECT_GE(b.events["gossip_received"], 1);
    EXPECT_EQ(b.events["tunables"], 1);
    for (const char* k : {"ready_bad_cycle", "gossip_sent_bad", "gossip_received_bad", "cycle_bad", "agreed_bad",
                          "bucket_bad", "tunables_bad", "callback_error"})
      EXPECT_EQ(b.events[k], 0) << k;
    EXPECT_FALSE(b.chunk_starts.empty());
    EXPECT_EQ(b.chunk_starts, b.chunk_ends);  // every chunk started once and ended once, ok
    for (auto& [seq, n] : b.chunk_starts) EXPECT_EQ(n, 1) << "sequence " << seq;
    EXPECT_GE(b.max_agree_us, 0);
  }
}

TEST(pipeline_e2e, a_part_installed_in_the_slot_mid_run_sees_the_buckets_after_it) {
  // The session's wiring: the pipeline's observer is an observer_slot (start_timeline's). With
  // nothing installed, fusion builds no bucket event; a part installed later gets the buckets
  // of every batch after it.
  std::vector<std::shared_ptr<telemetry::observer_slot>> slots{std::make_shared<telemetry::observer_slot>(),
                                                               std::make_shared<telemetry::observer_slot>()};
  auto job = start_job(2, {}, [&](int r) { return slots[static_cast<std::size_t>(r)]; });
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  auto allreduce_on_both = [&](const std::string& name) {
    std::vector<int> bad(2, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        std::vector<float> v(16, 1.0f);
        waiter w;
        job[r].pipe->enqueue({make(name, collective_kind::allreduce, dtype::f32, {16}), v.data(), v.data(),
                              w.callback()});
        if (!w.wait() || !w.result.ok() || v[0] != 2.0f) ++bad[r];
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(bad, (std::vector<int>{0, 0})) << name;
  };
  allreduce_on_both("before");
  std::vector<std::shared_ptr<counting_observer>> obs{std::make_shared<counting_observer>(),
                                                       std::make_shared<counting_observer>()};
  for (int r = 0; r < 2; ++r) slots[static_cast<std::size_t>(r)]->exchange(obs[static_cast<std::size_t>(r)]);
  allreduce_on_both("after");
  for (int r = 0; r < 2; ++r) slots[static_cast<std::size_t>(r)]->exchange(nullptr);
  allreduce_on_both("removed");
  stop_job(job);
  for (int r = 0; r < 2; ++r) {
    auto& b = *obs[static_cast<std::size_t>(r)];
    std::lock_guard lk(b.mu);
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(b.bucketed, (std::set<std::string>{"after"}));
    EXPECT_EQ(b.events["bucket_bad"], 0);
  }
}

TEST(pipeline_e2e, shutdown_ends_ops_still_in_negotiation) {
  auto job = start_job(2);
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  std::vector<float> v(16, 1.0f);
  waiter w;
  job[0].pipe->enqueue({make("lonely", collective_kind::allreduce, dtype::f32, {16}), v.data(), v.data(), w.callback()});
  job[0].pipe->shutdown();
  ASSERT_TRUE(w.wait(1s));
  EXPECT_EQ(w.calls, 1);
  EXPECT_EQ(w.result.code(), errc::shutdown);
  EXPECT_EQ(w.result.message(), "allreduce('lonely'): shut down with 'lonely' pending");
  // Rank 1 learns that rank 0 left: its next op ends with an error naming rank 0, no hang.
  waiter w1;
  job[1].pipe->enqueue({make("after", collective_kind::allreduce, dtype::f32, {16}), v.data(), v.data(), w1.callback()});
  ASSERT_TRUE(w1.wait(10s));
  EXPECT_FALSE(w1.result.ok());
  EXPECT_NE(w1.result.message().find("rank 0"), std::string::npos) << w1.result.to_string();
  // After shutdown, enqueue ends the op at once.
  waiter w2;
  job[0].pipe->enqueue({make("late", collective_kind::allreduce, dtype::f32, {16}), v.data(), v.data(), w2.callback()});
  EXPECT_TRUE(w2.wait(0ms));
  EXPECT_EQ(w2.result.code(), errc::shutdown);
  stop_job(job);
}

}  // namespace
}  // namespace chorus
