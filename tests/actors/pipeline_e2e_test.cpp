// The real pipeline over real communicators (TCP data plane, CAF control plane on 127.0.0.1),
// with every rank of the job in this one process, one thread per rank. Every wait has a hard
// bound. The multi-process tests of the APIs (tests/multiproc) complement these.
#include "actors/pipeline.hpp"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "runtime/collectives/communicator.hpp"
#include "runtime/fusion/resnet50_sizes.hpp"
#include "telemetry/observer_slot.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct rank_job {
  std::unique_ptr<communicator> comm;
  std::unique_ptr<pipeline> pipe;
};

/// Starts `n` ranks (communicator + pipeline each) in parallel threads; `observer_of_rank`
/// (optional) gives each rank its own telemetry observer.
std::vector<rank_job> start_job(int n, pipeline_options opts = {},
                                std::function<std::shared_ptr<telemetry::observer>(int)> observer_of_rank = {}) {
  uint16_t port = n > 1 ? free_port() : 0;
  std::vector<rank_job> jobs(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      process_env env;
      env.rank = r;
      env.size = n;
      env.local_rank = r;
      env.local_size = n;
      env.rendezvous_port = port;
      env.rendezvous_timeout = 20s;
      env.source = "chorus";
      mesh::mesh_options t;
      t.connect_timeout = 20s;
      auto comm = communicator::create(env, t, collective_options{});
      if (!comm) {
        errors[r] = comm.error().to_string();
        return;
      }
      auto o = opts;
      o.connect_timeout = 20s;
      if (observer_of_rank) o.observer = observer_of_rank(r);
      auto pipe = pipeline::start(**comm, o);
      if (!pipe) {
        errors[r] = pipe.error().to_string();
        (*comm)->close();
        return;
      }
      jobs[r].comm = std::move(*comm);
      jobs[r].pipe = std::move(*pipe);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return jobs;
}

void stop_job(std::vector<rank_job>& jobs) {
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
  bool wait(std::chrono::milliseconds t = 20s) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, t, [&] { return calls > 0; });
  }
};

tensor_spec make(std::string name, collective_kind k, dtype t, std::vector<int64_t> shape, reduce_op op = reduce_op::sum,
                 int root = -1) {
  return tensor_spec{std::move(name), k, t, std::move(shape), op, root, device_kind::cpu, 0};
}

/// `n` steps of one 1 MiB allreduce of ones on every rank at once (each element sums to the
/// job's size), named `name` + step; expects every result exact.
void steps_of_ones(std::vector<rank_job>& job, const std::string& name, int n = 1) {
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
std::string on_every_rank(std::vector<rank_job>& job, const std::function<status(pipeline&)>& fn) {
  std::vector<status> out(job.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < job.size(); ++r) threads.emplace_back([&, r] { out[r] = fn(*job[r].pipe); });
  for (auto& t : threads) t.join();
  std::string failures;
  for (std::size_t r = 0; r < out.size(); ++r)
    if (!out[r].ok()) failures += "rank " + std::to_string(r) + ": " + out[r].to_string() + "; ";
  return failures;
}

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

/// The streams and sizes of the chunks started, in order.
struct chunk_observer final : telemetry::observer {
  std::mutex mu;
  std::vector<std::pair<int, std::size_t>> chunks;
  void on_chunk_start(int stream, uint64_t, std::size_t bytes, telemetry::time_point) override {
    std::lock_guard lk(mu);
    chunks.emplace_back(stream, bytes);
  }
  std::vector<std::pair<int, std::size_t>> take() {
    std::lock_guard lk(mu);
    return std::exchange(chunks, {});
  }
};

TEST(pipeline_e2e, start_streams_and_set_tunables_decide_the_streams_and_chunks_of_later_batches) {
  pipeline_options o;
  o.start_streams = 1;
  o.chunk_bytes = 1 << 14;
  o.in_place_bytes = 0;
  std::vector<std::shared_ptr<chunk_observer>> obs{std::make_shared<chunk_observer>(),
                                                   std::make_shared<chunk_observer>()};
  auto job = start_job(2, o, [&](int r) { return obs[static_cast<std::size_t>(r)]; });
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  steps_of_ones(job, "first");
  for (auto& [stream, bytes] : obs[0]->take()) {
    EXPECT_EQ(stream, 0);
    EXPECT_LE(bytes, std::size_t{1} << 14);
  }
  // Quiescent on both ranks: both switch before either enqueues again.
  telemetry::tunables t{64u << 20, 1u << 16, 3, std::chrono::microseconds(500), 0};
  for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(t).ok());
  steps_of_ones(job, "second");
  std::set<int> streams;
  for (auto& [stream, bytes] : obs[0]->take()) {
    streams.insert(stream);
    EXPECT_LE(bytes, std::size_t{1} << 16);
  }
  EXPECT_GE(streams.size(), 2u);
  EXPECT_LE(*streams.rbegin(), 2);
  // Values out of range are refused, naming them.
  t.streams = 9;
  auto bad = job[0].pipe->set_tunables(t);
  EXPECT_EQ(bad.code(), errc::invalid_argument);
  EXPECT_NE(bad.message().find("streams=9, expected 1..8"), std::string::npos) << bad.to_string();
  t.streams = 1;
  t.chunk_bytes = 0;
  EXPECT_EQ(job[0].pipe->set_tunables(t).code(), errc::invalid_argument);
  stop_job(job);
}

TEST(pipeline_e2e, set_tunables_is_refused_while_autotuning) {
  pipeline_options o;
  o.autotune.enabled = true;
  auto job = start_job(1, o);
  ASSERT_TRUE(job[0].pipe);
  auto st = job[0].pipe->set_tunables({1u << 20, 1u << 20, 1, std::chrono::microseconds(1000), 1u << 20});
  EXPECT_EQ(st.code(), errc::config) << st.to_string();
  stop_job(job);
}

/// Counts the autotuner's agreed windows and the chunks' streams.
struct autotune_counter final : telemetry::observer {
  std::mutex mu;
  int windows = 0;
  std::set<int> streams;
  void on_autotune(const telemetry::autotune_event&, telemetry::time_point) override {
    std::lock_guard lk(mu);
    ++windows;
  }
  void on_chunk_start(int stream, uint64_t, std::size_t, telemetry::time_point) override {
    std::lock_guard lk(mu);
    streams.insert(stream);
  }
  std::pair<int, std::set<int>> take() {
    std::lock_guard lk(mu);
    return {std::exchange(windows, 0), std::exchange(streams, {})};
  }
};

TEST(pipeline_e2e, a_held_autotuner_scores_nothing_and_a_restart_searches_from_the_tunables_set) {
  pipeline_options o;
  o.autotune.enabled = true;
  o.autotune_held = true;
  o.autotune.steps_per_sample = 1;
  o.autotune.windows_per_sample = 1;
  o.chunk_bytes = 1 << 16;
  o.in_place_bytes = 0;
  std::vector<std::shared_ptr<autotune_counter>> obs{std::make_shared<autotune_counter>(),
                                                     std::make_shared<autotune_counter>()};
  auto job = start_job(2, o, [&](int r) { return obs[static_cast<std::size_t>(r)]; });
  ASSERT_TRUE(job[0].pipe && job[1].pipe);
  // Held: set_tunables drives the pipeline, no window is scored.
  telemetry::tunables one{1u << 20, 1u << 16, 1, std::chrono::microseconds(1000), 0};
  for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(one).ok());
  steps_of_ones(job, "held", 6);
  for (auto& ob : obs) {
    auto [windows, streams] = ob->take();
    EXPECT_EQ(windows, 0);
    EXPECT_EQ(streams, (std::set<int>{0}));
  }
  // Resumed with a restart: windows are scored and agreed on both ranks, results stay exact.
  for (auto& j : job) ASSERT_TRUE(j.pipe->resume_autotune(true).ok());
  steps_of_ones(job, "tuned", 12);
  // Autotuning: set_tunables is refused. Held again (collective: every rank pads to the most
  // windows any rank submitted, and waits until they are agreed), both ranks have handled the
  // same windows, and set_tunables works.
  EXPECT_EQ(job[0].pipe->set_tunables(one).code(), errc::config);
  const auto hold = [](pipeline& p) { return p.hold_autotune(); };
  ASSERT_EQ(on_every_rank(job, hold), "");
  std::vector<int> windows;
  for (auto& ob : obs) windows.push_back(ob->take().first);
  EXPECT_GT(windows[0], 0);
  EXPECT_EQ(windows[0], windows[1]);
  for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(one).ok());
  steps_of_ones(job, "held again", 4);
  for (auto& ob : obs) {
    auto [w, streams] = ob->take();
    EXPECT_EQ(w, 0);
    EXPECT_EQ(streams, (std::set<int>{0}));
  }
  // Hold right after tuned steps, again and again: ranks cut their windows where agreements
  // happen to arrive, so their counts differ at a hold; the padding makes every rank handle the
  // same windows and the tuners stay alike (a divergence stops the job with "ranks computed
  // different proposals").
  for (int round = 0; round < 6; ++round) {
    for (auto& j : job) ASSERT_TRUE(j.pipe->resume_autotune(false).ok());
    steps_of_ones(job, "resumed" + std::to_string(round) + "-", 3);
    ASSERT_EQ(on_every_rank(job, hold), "") << round;
    for (auto& j : job) ASSERT_TRUE(j.pipe->set_tunables(one).ok());
    steps_of_ones(job, "fixed" + std::to_string(round) + "-", 1);
  }
  for (auto& j : job) ASSERT_TRUE(j.pipe->resume_autotune(false).ok());
  steps_of_ones(job, "last", 3);
  stop_job(job);
}

TEST(pipeline_e2e, hold_and_resume_need_the_autotuner) {
  auto job = start_job(1);
  ASSERT_TRUE(job[0].pipe);
  EXPECT_EQ(job[0].pipe->hold_autotune().code(), errc::config);
  EXPECT_EQ(job[0].pipe->resume_autotune(true).code(), errc::config);
  stop_job(job);
}

TEST(pipeline_e2e, an_autotune_streams_axis_above_the_connections_is_refused_naming_both) {
  process_env env;
  env.source = "chorus";
  auto comm = communicator::create(env, mesh::mesh_options{}, collective_options{});
  ASSERT_TRUE(comm.ok()) << comm.error().to_string();
  pipeline_options o;
  o.autotune.enabled = true;
  o.autotune.max_streams = 9;
  auto pipe = pipeline::start(**comm, o);
  ASSERT_FALSE(pipe.ok());
  EXPECT_EQ(pipe.error().code(), errc::config);
  EXPECT_NE(pipe.error().message().find("CHORUS_MAX_STREAMS=9 but only CHORUS_NUM_STREAMS=8"), std::string::npos)
      << pipe.error().to_string();
  (*comm)->close();
}

}  // namespace
}  // namespace chorus
