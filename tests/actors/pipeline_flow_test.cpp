// The whole actor chain of R ranks (producer → negotiator → fusion → senders → completion →
// producer) in one actor system under CAF's test coordinator, over a fake data plane that
// ends a chunk once every rank has started it and then does the collective's arithmetic
// itself. Checks exact results for fused, in-place, chunked, broadcast and allgather ops,
// every done callback called exactly once (also on chunk errors and at shutdown), and that a
// slowed stream with a small start window never deadlocks the ranks.
#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "actors/chunk_runner.hpp"
#include "actors/completion_actor.hpp"
#include "actors/fusion_actor.hpp"
#include "actors/negotiator_actor.hpp"
#include "actors/pipeline.hpp"
#include "actors/producer_actor.hpp"
#include "actors/rank_actors.hpp"
#include "actors/sender_actor.hpp"

namespace chorus {
namespace {

uint64_t test_seed(uint64_t fallback) {
  const char* env = std::getenv("CHORUS_TEST_SEED");
  uint64_t seed = env ? std::strtoull(env, nullptr, 10) : fallback;
  std::cout << "seed=" << seed << " (CHORUS_TEST_SEED=" << seed << " re-runs it)\n";
  return seed;
}

template <class State>
State& state_of(const caf::actor& a) {
  return dynamic_cast<caf::stateful_actor<State>&>(*caf::actor_cast<caf::abstract_actor*>(a)).state;
}

template <class T>
void reduce_into(std::vector<std::byte*> bufs, std::size_t bytes, reduce_op op) {
  std::size_t n = bytes / sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    T acc{};
    for (std::size_t r = 0; r < bufs.size(); ++r) {
      T v;
      std::memcpy(&v, bufs[r] + i * sizeof(T), sizeof(T));
      acc = r == 0 ? v : op == reduce_op::max ? std::max(acc, v) : static_cast<T>(acc + v);
    }
    if (op == reduce_op::average) acc = static_cast<T>(acc / static_cast<T>(bufs.size()));
    for (auto* b : bufs) std::memcpy(b + i * sizeof(T), &acc, sizeof(T));
  }
}

/// In-process data plane for R ranks: a chunk ends when every rank has started it.
struct fake_plane {
  struct start {
    chunk_work work;
    int stream = 0;
  };
  int ranks = 1;
  std::map<uint64_t, std::map<int, start>> started;  // sequence → rank → start
  std::vector<std::vector<caf::actor>> senders;       // [rank][stream]
  std::set<std::pair<int, int>> slow;                 // (rank, stream) ended last
  std::set<uint64_t> failing;                         // sequences that fail everywhere
  uint64_t ended = 0;
  std::vector<uint64_t> ready() const {
    std::vector<uint64_t> out;
    for (auto& [seq, by_rank] : started)
      if (static_cast<int>(by_rank.size()) == ranks) out.push_back(seq);
    return out;
  }
  bool is_slow(uint64_t seq) const {
    for (auto& [r, s] : started.at(seq))
      if (slow.count({r, s.stream})) return true;
    return false;
  }
  void end(uint64_t seq) {
    auto by_rank = std::move(started.at(seq));
    started.erase(seq);
    for (auto& [r, s] : by_rank)  // every rank planned the sequence alike
      EXPECT_TRUE(s.work.algo == by_rank.at(0).work.algo && s.work.bytes == by_rank.at(0).work.bytes) << seq;
    status st = failing.count(seq) ? status{errc::connection_lost, "rank 1 closed the connection (injected)"} : status{};
    if (st.ok()) compute(by_rank);
    for (auto& [r, s] : by_rank) caf::anon_send(senders[r][s.stream], chunk_ran{seq, st});
    ++ended;
  }
  void compute(std::map<int, start>& by_rank) {
    const auto& w = by_rank.at(0).work;
    std::vector<std::byte*> bufs;
    switch (w.algo) {
      case chunk_algo::ring_allreduce:
      case chunk_algo::exchange_allreduce:
        for (auto& [r, s] : by_rank) bufs.push_back(s.work.data);
        if (w.type == dtype::f32) reduce_into<float>(bufs, w.bytes, w.op);
        if (w.type == dtype::f64) reduce_into<double>(bufs, w.bytes, w.op);
        break;
      case chunk_algo::broadcast:
        for (auto& [r, s] : by_rank)
          if (r != w.root && w.bytes) std::memcpy(s.work.data, by_rank.at(w.root).work.data, w.bytes);
        break;
      case chunk_algo::allgather_counts: {
        std::vector<int64_t> dims(static_cast<std::size_t>(ranks));
        for (auto& [r, s] : by_rank) dims[r] = s.work.job->first_dims[r];
        for (auto& [r, s] : by_rank) s.work.job->first_dims = dims;
        break;
      }
      case chunk_algo::allgather_data:
      case chunk_algo::hier_allgather: {
        std::vector<std::byte> all;
        for (auto& [r, s] : by_rank) {
          auto counts = prepare_gather(*s.work.job, r, ranks);
          ASSERT_TRUE(counts.ok()) << counts.error().to_string();
          std::size_t before = 0;
          for (int q = 0; q < r; ++q) before += (*counts)[q];
          std::size_t e = size_of(s.work.type);
          auto* mine = s.work.job->gathered.data() + before * e;
          all.insert(all.end(), mine, mine + (*counts)[r] * e);
        }
        for (auto& [r, s] : by_rank) s.work.job->gathered = all;
        break;
      }
    }
  }
};

struct plane_runner final : chunk_runner {
  plane_runner(fake_plane* p, int r) : plane(p), rank(r) {}
  fake_plane* plane;
  int rank;
  void run(const chunk_work& w, int stream) override {
    auto& slot = plane->started[w.sequence];
    EXPECT_EQ(slot.count(rank), 0u) << "rank " << rank << " started sequence " << w.sequence << " twice";
    slot[rank] = {w, stream};
  }
};

struct outcome {
  int calls = 0;
  status result;
  std::vector<std::byte> gathered;
  std::vector<int64_t> dims;
};

/// R ranks of real actors over the fake plane.
struct flow_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  fake_plane plane;
  std::vector<rank_actors> ranks;
  std::vector<std::map<std::string, outcome>> outcomes;
  std::vector<std::map<std::string, std::vector<std::byte>>> buffers;
  std::mt19937_64 rng;

  flow_fixture(int r, int streams, uint64_t seed, std::size_t window = 4, std::size_t in_place = 0) : rng(seed) {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    plane.ranks = r;
    plane.senders.resize(r), outcomes.resize(r), buffers.resize(r);
    for (int k = 0; k < r; ++k) {
      rank_actors w;
      w.producer = sys->spawn(producer_actor, producer_config{k, r});
      w.negotiator = sys->spawn(negotiator_actor, negotiator_config{.rank = k, .size = r});
      w.fusion = sys->spawn(fusion_actor, fusion_config{.rank = k, .size = r, .fusion_threshold = 4096,
                                                        .chunk_bytes = 1024, .small_bytes = 512,
                                                        .in_place_bytes = in_place, .start_window = window,
                                                        .pool_bytes = 16384, .pre_touch = false});
      w.completion = sys->spawn(completion_actor, completion_config{k, r});
      auto runner = std::make_shared<plane_runner>(&plane, k);
      for (int s = 0; s < streams; ++s) w.senders.push_back(sys->spawn(sender_actor, sender_config{s, runner}));
      plane.senders[k] = w.senders;
      ranks.push_back(w);
    }
    for (auto& w : ranks) {
      wire_actors(w);
      std::vector<caf::actor> negs;
      for (auto& x : ranks) negs.push_back(x.negotiator);
      caf::anon_send(w.negotiator, peers_connected{negs});
    }
    sched->run();
  }
  ~flow_fixture() {
    for (auto& w : ranks)
      for (auto& a : actors_of(w)) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched->run();
  }
  static std::vector<caf::actor> actors_of(const rank_actors& w) {
    auto v = w.senders;
    v.insert(v.end(), {w.producer, w.negotiator, w.fusion, w.completion});
    return v;
  }

  /// Enqueues `s` on `rank` with `values` as its input (and output, except for allgather).
  template <class T>
  void enqueue(int rank, tensor_spec s, const std::vector<T>& values) {
    auto& buf = buffers[rank][s.name];
    buf.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(buf.data(), values.data(), buf.size());
    op_request r;
    r.spec = s;
    r.input = buf.data();
    r.output = s.kind == collective_kind::allgather ? nullptr : buf.data();
    auto* out = &outcomes[rank][s.name];
    r.done = [out](const status& st, std::vector<std::byte> g, std::vector<int64_t> d) {
      *out = outcome{out->calls + 1, st, std::move(g), std::move(d)};
    };
    caf::anon_send(ranks[rank].producer, op_enqueued{std::make_shared<op_request>(std::move(r)), sched->clock().now()});
  }
  template <class T>
  std::vector<T> values(int rank, const std::string& name) {
    auto& b = buffers[rank][name];
    std::vector<T> v(b.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
    return v;
  }

  /// Delivers messages, timers and chunk ends (random order, slow streams last) until quiet.
  void settle() {
    for (int guard = 0; guard < 1000000; ++guard) {
      sched->run();
      auto ready = plane.ready();
      if (!ready.empty()) {
        std::vector<uint64_t> fast;
        for (auto q : ready)
          if (!plane.is_slow(q)) fast.push_back(q);
        auto& pick = fast.empty() ? ready : fast;
        plane.end(pick[rng() % pick.size()]);
        continue;
      }
      if (!sched->trigger_timeout()) {
        EXPECT_TRUE(plane.started.empty()) << plane.started.size() << " chunks started on some ranks only: deadlock";
        return;
      }
    }
    FAIL() << "the pipeline never went quiet";
  }
};

tensor_spec make(std::string name, collective_kind k, dtype t, std::vector<int64_t> shape, reduce_op op = reduce_op::sum,
                 int root = -1) {
  return tensor_spec{std::move(name), k, t, std::move(shape), op, root, device_kind::cpu, 0};
}

/// Two steps of mixed ops on R = 3 ranks (tensors from `in_place` bytes up skip fusion); `stolen` gets the chunks stolen on all ranks.
void run_mixed_steps(int S, std::size_t window, std::size_t in_place, uint64_t seed, uint64_t& stolen) {
  const int R = 3;
  flow_fixture f(R, S, seed, window, in_place);
  f.plane.slow = {{0, 1}, {2, 0}};  // a different slowed stream on two ranks
  const std::vector<int64_t> sizes{1, 7, 100, 300, 1000, 2000, 0};
  for (int step = 0; step < 2; ++step) {
    std::vector<std::function<void(int)>> ops;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      ops.push_back([&, i](int r) {
        std::vector<float> v(static_cast<std::size_t>(sizes[i]));
        for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(r) + 0.5f * static_cast<float>(k);
        f.enqueue(r, make("a" + std::to_string(i), collective_kind::allreduce, dtype::f32, {sizes[i]}), v);
      });
    for (int64_t n : {50, 600})
      ops.push_back([&, n](int r) {
        std::vector<double> v(static_cast<std::size_t>(n));
        for (std::size_t k = 0; k < v.size(); ++k) v[k] = r * 3.0 + static_cast<double>(k);
        f.enqueue(r, make("avg" + std::to_string(n), collective_kind::allreduce, dtype::f64, {n}, reduce_op::average), v);
      });
    ops.push_back([&](int r) {
      std::vector<float> v(33);
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(r) + static_cast<float>(k);
      f.enqueue(r, make("mx", collective_kind::allreduce, dtype::f32, {33}, reduce_op::max), v);
    });
    ops.push_back([&](int r) {
      std::vector<float> v(500);
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = 100.0f * static_cast<float>(r) + static_cast<float>(k);
      f.enqueue(r, make("bc", collective_kind::broadcast, dtype::f32, {500}, reduce_op::sum, 1), v);
    });
    ops.push_back([&](int r) {
      std::vector<float> v(static_cast<std::size_t>(r) * 3);  // rank 0 contributes no rows
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = 1000.0f * static_cast<float>(r) + static_cast<float>(k);
      f.enqueue(r, make("ag", collective_kind::allgather, dtype::f32, {r, 3}), v);
    });
    // Each rank in its own order, ranks interleaved, messages and time flying in between, so
    // ops are agreed across several cycles and batches.
    std::vector<std::vector<std::size_t>> order(R);
    for (auto& o : order) {
      for (std::size_t i = 0; i < ops.size(); ++i) o.push_back(i);
      std::shuffle(o.begin(), o.end(), f.rng);
    }
    std::vector<std::size_t> next(R, 0);
    for (std::size_t left = R * ops.size(); left > 0;) {
      int r = static_cast<int>(f.rng() % R);
      if (next[r] == ops.size()) continue;
      ops[order[r][next[r]++]](r);
      --left;
      for (auto k = f.rng() % 8; k > 0 && f.sched->try_run_once(); --k) {
      }
      if (f.rng() % 3 == 0) f.sched->advance_time(std::chrono::microseconds(f.rng() % 2000));
    }
    f.settle();
    for (int r = 0; r < R; ++r) {
      for (auto& [name, o] : f.outcomes[r]) {
        EXPECT_EQ(o.calls, step + 1) << name << " on rank " << r;
        EXPECT_TRUE(o.result.ok()) << name << " on rank " << r << ": " << o.result.to_string();
      }
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        auto v = f.values<float>(r, "a" + std::to_string(i));
        for (std::size_t k = 0; k < v.size(); ++k) ASSERT_EQ(v[k], 3.0f + 1.5f * static_cast<float>(k)) << "a" << i;
      }
      for (int64_t n : {50, 600}) {
        auto v = f.values<double>(r, "avg" + std::to_string(n));
        for (std::size_t k = 0; k < v.size(); ++k) {
          double sum = 0;
          for (int q = 0; q < R; ++q) sum += q * 3.0 + static_cast<double>(k);
          ASSERT_EQ(v[k], sum / R) << "avg" << n;
        }
      }
      auto mx = f.values<float>(r, "mx");
      for (std::size_t k = 0; k < mx.size(); ++k) ASSERT_EQ(mx[k], 2.0f + static_cast<float>(k));
      auto bc = f.values<float>(r, "bc");
      for (std::size_t k = 0; k < bc.size(); ++k) ASSERT_EQ(bc[k], 100.0f + static_cast<float>(k));
      const auto& ag = f.outcomes[r]["ag"];
      EXPECT_EQ(ag.dims, (std::vector<int64_t>{0, 1, 2}));
      std::vector<float> want;
      for (int q = 0; q < R; ++q)
        for (int k = 0; k < q * 3; ++k) want.push_back(1000.0f * static_cast<float>(q) + static_cast<float>(k));
      ASSERT_EQ(ag.gathered.size(), want.size() * sizeof(float));
      EXPECT_EQ(std::memcmp(ag.gathered.data(), want.data(), ag.gathered.size()), 0);
    }
  }
  auto& fs = state_of<fusion_state>(f.ranks[0].fusion);  // fused and multi-chunk buckets ran
  EXPECT_GT(fs.fused_bytes, 0u);
  EXPECT_GT(f.plane.ended, fs.buckets);
  stolen = 0;
  for (auto& w : f.ranks)
    for (auto& snd : w.senders) stolen += state_of<sender_state>(snd).stats.stolen;
  std::cout << "stolen=" << stolen << " buckets=" << fs.buckets << " chunks=" << f.plane.ended << "\n";
}

TEST(pipeline_flow, every_op_ends_once_with_exact_results) {
  uint64_t stolen = 0;
  run_mixed_steps(3, 4, 0, test_seed(42), stolen);
}

TEST(pipeline_flow, slowed_streams_lose_chunks_to_others_without_deadlock) {
  uint64_t stolen = 0;
  run_mixed_steps(2, 16, 2048, test_seed(43), stolen);  // tensors of 2 KiB and more: in place
  EXPECT_GT(stolen, 0u);
}

TEST(pipeline_flow, a_failed_chunk_ends_its_bucket_with_the_error_and_nothing_else) {
  const int R = 2;
  flow_fixture f(R, 2, test_seed(7));
  f.plane.failing = {fusion_config{}.first_sequence + 1};
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < 4; ++i)
      f.enqueue(r, make("t" + std::to_string(i), collective_kind::allreduce, dtype::f32, {400}),
                std::vector<float>(400, 1.0f));
  f.settle();
  int failed = 0;
  for (int r = 0; r < R; ++r) {
    for (auto& [name, o] : f.outcomes[r]) {
      EXPECT_EQ(o.calls, 1) << name;
      if (!o.result.ok()) {
        ++failed;
        EXPECT_EQ(o.result.code(), errc::connection_lost);
        EXPECT_NE(o.result.message().find("allreduce('" + name + "') on rank " + std::to_string(r)), std::string::npos)
            << o.result.message();
      }
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_LT(failed, 8);
}

TEST(pipeline_flow, shutdown_drain_ends_every_pending_op_once) {
  const int R = 2;
  flow_fixture f(R, 2, test_seed(9));
  f.enqueue(0, make("only0", collective_kind::allreduce, dtype::f32, {4}), std::vector<float>(4, 1.0f));
  f.enqueue(0, make("both", collective_kind::allreduce, dtype::f32, {4}), std::vector<float>(4, 1.0f));
  f.enqueue(1, make("both", collective_kind::allreduce, dtype::f32, {4}), std::vector<float>(4, 1.0f));
  f.sched->run();
  for (int guard = 0; guard < 100 && f.plane.started.empty(); ++guard) f.sched->trigger_timeout(), f.sched->run();
  caf::anon_send(f.ranks[0].negotiator, stop_atom::value);
  caf::anon_send(f.ranks[0].producer, drain_atom::value, int64_t{1000});
  f.settle();
  EXPECT_EQ(f.outcomes[0]["only0"].calls, 1);
  EXPECT_EQ(f.outcomes[0]["only0"].result.code(), errc::shutdown);
  EXPECT_EQ(f.outcomes[0]["only0"].result.message(), "allreduce('only0'): shut down with 'only0' pending");
  EXPECT_EQ(f.outcomes[0]["both"].calls, 1);
  EXPECT_TRUE(f.outcomes[0]["both"].result.ok()) << "agreed before the stop, so it still ran";
  // After the drain, new ops end at once.
  f.enqueue(0, make("late", collective_kind::allreduce, dtype::f32, {4}), std::vector<float>(4, 1.0f));
  f.sched->run();
  EXPECT_EQ(f.outcomes[0]["late"].calls, 1);
  EXPECT_EQ(f.outcomes[0]["late"].result.code(), errc::shutdown);
}

}  // namespace
}  // namespace chorus
