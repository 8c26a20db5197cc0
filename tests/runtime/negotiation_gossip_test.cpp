// The gossip negotiator (runtime/negotiation/gossip.hpp), driven by the virtual-clock network
// of runtime/negotiation/simulator.hpp: no threads, no sleeps. Randomised tests print their
// seed; set CHORUS_TEST_SEED to re-run one.
#include "runtime/negotiation/gossip.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>

#include "runtime/negotiation/simulator.hpp"

namespace chorus::negotiation {
namespace {

using namespace std::chrono_literals;

uint64_t test_seed(uint64_t fallback) {
  uint64_t seed = std::getenv("CHORUS_TEST_SEED") ? std::strtoull(std::getenv("CHORUS_TEST_SEED"), nullptr, 10) : fallback;
  std::cout << "seed=" << seed << " (CHORUS_TEST_SEED=" << seed << " re-runs it)\n";
  return seed;
}

tensor_spec spec(std::string name, std::vector<int64_t> shape, dtype type = dtype::f32,
                 collective_kind kind = collective_kind::allreduce, reduce_op op = reduce_op::sum, int root = -1) {
  return tensor_spec{std::move(name), kind, type, std::move(shape), op, root, device_kind::cpu, 0};
}

// A small model: mixed shapes, dtypes and collectives.
std::vector<tensor_spec> model(int count) {
  std::vector<tensor_spec> out;
  for (int i = 0; i < count; ++i) {
    auto s = spec("layer" + std::to_string(i) + ".weight", {64 * (i + 1), 32}, i % 3 == 0 ? dtype::f16 : dtype::f32);
    if (i % 5 == 4) s.kind = collective_kind::broadcast, s.root = 0;
    if (i % 7 == 6) s.kind = collective_kind::allgather;
    out.push_back(s);
  }
  return out;
}

std::unique_ptr<simulator> make_sim(int n, uint64_t seed, negotiation_options nego = {}, bool codec = true) {
  simulator_options o;
  o.strategy = "gossip";
  o.negotiation = nego;
  o.min_latency = 1us;
  o.max_latency = 80us;  // a wide range: deliveries in random order
  o.seed = seed;
  o.through_codec = codec;
  auto sim = simulator::create(n, o);
  EXPECT_TRUE(sim.ok()) << sim.error().to_string();
  return std::move(sim.value());
}

// One training step: every rank enqueues every tensor in its own random order, with random
// gaps in which messages fly, so tensors become ready on different ranks in different cycles.
void run_step(simulator& sim, const std::vector<tensor_spec>& tensors, std::mt19937_64& rng) {
  int n = sim.size();
  std::vector<std::vector<tensor_spec>> order(n, tensors);
  for (auto& o : order) std::shuffle(o.begin(), o.end(), rng);
  std::vector<std::size_t> next(n, 0);
  for (std::size_t left = tensors.size() * n; left > 0; --left) {
    int r = static_cast<int>(rng() % n);
    while (next[r] == tensors.size()) r = (r + 1) % n;
    sim.enqueue(r, order[r][next[r]++]);
    sim.run_for(std::chrono::microseconds(rng() % 150));
  }
  ASSERT_TRUE(sim.run_until_idle()) << "negotiation did not finish";
}

TEST(GossipNegotiator, EveryRankAgreesForOneToSeventeenRanks) {
  auto base = test_seed(1234);
  for (int n = 1; n <= 17; ++n) {
    for (uint64_t trial = 0; trial < 3; ++trial) {
      uint64_t seed = base + 100 * n + trial;
      SCOPED_TRACE("ranks=" + std::to_string(n) + " seed=" + std::to_string(seed));
      std::mt19937_64 rng(seed);
      negotiation_options nego;
      nego.cycle_time = 100us;
      nego.hold_when_ahead = trial != 0;  // ranks ahead hold their new tensors: still live
      auto sim = make_sim(n, seed, nego, trial == 0);
      auto tensors = model(12);
      const int steps = 3;
      for (int s = 0; s < steps; ++s) run_step(*sim, tensors, rng);

      EXPECT_EQ(sim->divergence(), "");
      const auto& ref = sim->record(0);
      ASSERT_EQ(ref.assigned.size(), tensors.size());
      for (int r = 0; r < n; ++r) {
        const auto& rec = sim->record(r);
        EXPECT_TRUE(rec.errors.empty() && rec.rejected.empty() && rec.warnings.empty());
        EXPECT_FALSE(rec.fatal) << rec.fatal->to_string();
        // Each tensor agreed exactly once per step; batches in id order.
        std::map<uint32_t, int> times;
        for (const auto& b : rec.batches) {
          EXPECT_TRUE(std::is_sorted(b.ids.begin(), b.ids.end()));
          for (auto id : b.ids) ++times[id];
        }
        for (uint32_t id = 0; id < tensors.size(); ++id) EXPECT_EQ(times[id], steps) << "id " << id;
        // Exactly ceil(log2 N) messages sent and received per cycle, and every rank in every cycle.
        ASSERT_EQ(rec.cycles.size(), ref.cycles.size());
        for (std::size_t c = 0; c < rec.cycles.size(); ++c) {
          EXPECT_EQ(rec.cycles[c].cycle, c + 1);
          EXPECT_EQ(rec.cycles[c].messages_sent, static_cast<uint32_t>(gossip_rounds(n)));
          EXPECT_EQ(rec.cycles[c].messages_received, static_cast<uint32_t>(gossip_rounds(n)));
        }
      }
      for (const auto& a : ref.assigned) EXPECT_EQ(a.spec.name, a.name);
      // Readiness was spread over several cycles per step, not one lucky cycle.
      if (n >= 3) {
        EXPECT_GT(ref.batches.size(), static_cast<std::size_t>(steps));
      }
    }
  }
}

TEST(GossipNegotiator, ANameReadyInDifferentCyclesIsAgreedInTheLastOne) {
  negotiation_options nego;
  nego.cycle_time = 100us;
  auto sim = make_sim(5, test_seed(7), nego);
  auto a = spec("a", {4});
  sim->enqueue(0, a);
  ASSERT_TRUE(sim->run_until_idle());
  sim->enqueue(1, a);
  sim->enqueue(2, a);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(sim->record(r).batches.empty());
  sim->enqueue(3, a);
  sim->enqueue(4, a);
  ASSERT_TRUE(sim->run_until_idle());
  // Once it has an id, it travels as a bit: the same holds.
  sim->enqueue(1, a);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r : {0, 2, 3, 4}) sim->enqueue(r, a);
  ASSERT_TRUE(sim->run_until_idle());
  EXPECT_EQ(sim->divergence(), "");
  for (int r = 0; r < 5; ++r) {
    const auto& rec = sim->record(r);
    ASSERT_EQ(rec.assigned.size(), 1u);
    EXPECT_EQ(rec.assigned[0].id, 0u);
    ASSERT_EQ(rec.batches.size(), 2u);
    EXPECT_EQ(rec.batches[0].cycle, 3u);
    EXPECT_EQ(rec.batches[1].cycle, 5u);
    EXPECT_EQ(rec.batches[1].ids, std::vector<uint32_t>{0});
  }
}

TEST(GossipNegotiator, AnIdleJobSendsNothingAndAnIdleRankJoins) {
  negotiation_options nego;
  nego.stall_warning_time = duration::zero();
  auto sim = make_sim(9, test_seed(11), nego);
  sim->run_for(5s);
  EXPECT_EQ(sim->messages_total(), 0u);
  sim->enqueue(4, spec("x", {8}));
  ASSERT_TRUE(sim->run_until_idle());
  // One cycle that every rank joined, ceil(log2 9) = 4 messages each.
  EXPECT_EQ(sim->messages_total(), 9u * 4u);
  for (int r = 0; r < 9; ++r) EXPECT_EQ(sim->strategy(r).cycles_done(), 1u);
  sim->run_for(10s);
  EXPECT_EQ(sim->messages_total(), 9u * 4u);
  for (int r = 0; r < 9; ++r)
    if (r != 4) sim->enqueue(r, spec("x", {8}));
  ASSERT_TRUE(sim->run_until_idle());
  EXPECT_EQ(sim->divergence(), "");
  EXPECT_EQ(sim->record(0).batches.size(), 1u);
  auto total = sim->messages_total();
  sim->run_for(10s);
  EXPECT_EQ(sim->messages_total(), total);
}

TEST(GossipNegotiator, ContributionCycleIsTheCycleATensorReadyNowJoins) {
  auto sim = make_sim(2, test_seed(5));
  EXPECT_EQ(sim->strategy(0).contribution_cycle(), 1u);
  sim->enqueue(0, spec("x", {8}));  // rank 0 starts cycle 1 with x at once
  EXPECT_EQ(sim->strategy(0).cycles_done(), 0u);
  EXPECT_EQ(sim->strategy(0).contribution_cycle(), 2u);  // its part of cycle 1 is taken
  EXPECT_EQ(sim->strategy(1).contribution_cycle(), 1u);  // rank 1 has not joined yet
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 2; ++r) EXPECT_EQ(sim->strategy(r).contribution_cycle(), 2u);
}

struct mismatch_case {
  tensor_spec common, odd;
  std::string expected;
};
TEST(GossipNegotiator, MismatchedSpecsGiveTheSameErrorOnEveryRank) {
  auto base = spec("fc1.weight", {512, 128});
  auto other = [&](auto change) { auto s = base; change(s); return s; };
  auto bcast = spec("fc1.weight", {512, 128}, dtype::f32, collective_kind::broadcast, reduce_op::sum, 0);
  std::vector<mismatch_case> cases = {
      {base, other([](tensor_spec& s) { s.shape = {512, 256}; }),
       "allreduce('fc1.weight'): shape [512,256] on rank 3 but [512,128] on ranks 0-2"},
      {base, other([](tensor_spec& s) { s.type = dtype::f16; }),
       "allreduce('fc1.weight'): dtype f16 on rank 3 but f32 on ranks 0-2"},
      {base, other([](tensor_spec& s) { s.op = reduce_op::max; }),
       "allreduce('fc1.weight'): op max on rank 3 but sum on ranks 0-2"},
      {bcast, [&] { auto s = bcast; s.root = 1; return s; }(),
       "broadcast('fc1.weight'): root 1 on rank 3 but 0 on ranks 0-2"},
  };
  auto seed = test_seed(99);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    auto sim = make_sim(4, seed++);
    for (int r : {3, 0, 2, 1}) {
      sim->enqueue(r, r == 3 ? c.odd : c.common);
      sim->run_for(30us);
    }
    ASSERT_TRUE(sim->run_until_idle());
    EXPECT_EQ(sim->divergence(), "");
    for (int r = 0; r < 4; ++r) {
      const auto& rec = sim->record(r);
      ASSERT_EQ(rec.errors.size(), 1u);
      EXPECT_EQ(rec.errors[0].name, "fc1.weight");
      EXPECT_EQ(rec.errors[0].message, c.expected);
      EXPECT_TRUE(rec.assigned.empty() && rec.batches.empty());
    }
    // The failed name starts afresh: enqueued alike everywhere, it is agreed.
    for (int r = 0; r < 4; ++r) sim->enqueue(r, c.common);
    ASSERT_TRUE(sim->run_until_idle());
    EXPECT_EQ(sim->divergence(), "");
    EXPECT_EQ(sim->record(2).batches.size(), 1u);
  }
}

TEST(GossipNegotiator, ThreeWayMismatchNamesEveryGroup) {
  auto sim = make_sim(11, test_seed(5));
  for (int r = 0; r < 11; ++r) {
    auto s = spec("emb", {1000, 64});
    if (r == 2 || r == 5) s.shape = {1000, 32};
    if (r == 9) s.type = dtype::bf16;
    sim->enqueue(r, s);
    sim->run_for(10us);
  }
  ASSERT_TRUE(sim->run_until_idle());
  EXPECT_EQ(sim->divergence(), "");
  ASSERT_EQ(sim->record(7).errors.size(), 1u);
  EXPECT_EQ(sim->record(7).errors[0].message,
            "allreduce('emb'): shape [1000,32] on ranks 2,5 but [1000,64] on ranks 0-1,3-4,6-8,10; "
            "dtype bf16 on rank 9 but f32 on ranks 0-1,3-4,6-8,10");
}

TEST(GossipNegotiator, StallWarningNamesMissingRanksThenShutdownStopsEveryRank) {
  negotiation_options nego;
  nego.stall_warning_time = 1s;
  nego.stall_shutdown_time = 3s;
  auto sim = make_sim(6, test_seed(21), nego);
  for (int r = 0; r < 4; ++r) sim->enqueue(r, spec("g", {16}));
  ASSERT_TRUE(sim->run_until_idle());
  sim->run_for(1500ms);
  EXPECT_EQ(sim->divergence(), "");
  for (int r = 0; r < 6; ++r) {
    const auto& rec = sim->record(r);
    ASSERT_EQ(rec.warnings.size(), 1u) << "rank " << r;
    EXPECT_EQ(rec.warnings[0].name, "g");
    EXPECT_EQ(rec.warnings[0].missing_ranks, (std::vector<int>{4, 5}));
    EXPECT_EQ(rec.warnings[0].message,
              "stall: allreduce('g'): ready on ranks 0-3 but not produced by ranks 4-5 after 1 s "
              "(CHORUS_STALL_CHECK_TIME_SECONDS)");
    EXPECT_FALSE(rec.fatal);
  }
  sim->run_for(1s);
  EXPECT_TRUE(sim->record(0).warnings.size() == 1u && !sim->record(0).fatal);
  sim->run_for(1s);
  EXPECT_EQ(sim->divergence(), "");
  for (int r = 0; r < 6; ++r) {
    const auto& rec = sim->record(r);
    ASSERT_TRUE(rec.fatal) << "rank " << r;
    EXPECT_EQ(rec.fatal->code(), errc::timeout);
    EXPECT_EQ(rec.fatal->message(),
              "stall: allreduce('g'): ready on ranks 0-3 but not produced by ranks 4-5 after 3 s; "
              "stopping the job (CHORUS_STALL_SHUTDOWN_TIME_SECONDS)");
  }
  // Stopped: late enqueues are refused, nothing more is sent.
  auto sent = sim->messages_total();
  sim->enqueue(4, spec("g", {16}));
  EXPECT_EQ(sim->record(4).rejected.size(), 1u);
  sim->run_for(10s);
  EXPECT_EQ(sim->messages_total(), sent);
}

TEST(GossipNegotiator, StallOfARegisteredIdIsReportedByTheRanks) {
  negotiation_options nego;
  nego.stall_warning_time = 2s;
  auto sim = make_sim(7, test_seed(31), nego);
  for (int r = 0; r < 7; ++r) sim->enqueue(r, spec("h", {3, 3}));
  ASSERT_TRUE(sim->run_until_idle());
  for (int r : {0, 2, 6}) sim->enqueue(r, spec("h", {3, 3}));
  ASSERT_TRUE(sim->run_until_idle());
  sim->run_for(1900ms);
  EXPECT_TRUE(sim->record(1).warnings.empty());  // not yet
  sim->run_for(200ms);
  EXPECT_EQ(sim->divergence(), "");
  for (int r = 0; r < 7; ++r) {
    ASSERT_EQ(sim->record(r).warnings.size(), 1u);
    EXPECT_EQ(sim->record(r).warnings[0].missing_ranks, (std::vector<int>{1, 3, 4, 5}));
    EXPECT_EQ(sim->record(r).warnings[0].message,
              "stall: allreduce('h'): ready on ranks 0,2,6 but not produced by ranks 1,3-5 after 2 s "
              "(CHORUS_STALL_CHECK_TIME_SECONDS)");
  }
  // No shutdown limit: the late ranks catch up and it is agreed; no second warning.
  sim->run_for(60s);
  for (int r : {1, 3, 4, 5}) sim->enqueue(r, spec("h", {3, 3}));
  ASSERT_TRUE(sim->run_until_idle());
  EXPECT_EQ(sim->divergence(), "");
  EXPECT_EQ(sim->record(3).batches.size(), 2u);
  EXPECT_EQ(sim->record(3).warnings.size(), 1u);
  EXPECT_FALSE(sim->record(3).fatal);
}

TEST(GossipNegotiator, StallShutdownOfARegisteredIdWithWarningsOff) {
  negotiation_options nego;
  nego.stall_warning_time = duration::zero();
  nego.stall_shutdown_time = 5s;
  auto sim = make_sim(3, test_seed(37), nego);
  for (int r = 0; r < 3; ++r) sim->enqueue(r, spec("k", {1}));
  ASSERT_TRUE(sim->run_until_idle());
  sim->enqueue(1, spec("k", {1}));
  ASSERT_TRUE(sim->run_until_idle());
  sim->run_for(4900ms);
  EXPECT_FALSE(sim->record(0).fatal);  // not yet
  sim->run_for(200ms);
  EXPECT_EQ(sim->divergence(), "");
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(sim->record(r).warnings.empty());
    ASSERT_TRUE(sim->record(r).fatal);
    EXPECT_EQ(sim->record(r).fatal->message(),
              "stall: allreduce('k'): ready on rank 1 but not produced by ranks 0,2 after 5 s; "
              "stopping the job (CHORUS_STALL_SHUTDOWN_TIME_SECONDS)");
  }
}

TEST(GossipNegotiator, ScoresAndShutdownRequestsAreAgreed) {
  auto sim = make_sim(6, test_seed(41));
  sim->submit_score(1, 3.0);
  sim->submit_score(4, 1.5);
  sim->submit_score(5, 2.0);
  ASSERT_TRUE(sim->run_until_idle());
  sim->request_shutdown(2);
  ASSERT_TRUE(sim->run_until_idle());
  EXPECT_EQ(sim->divergence(), "");
  for (int r = 0; r < 6; ++r) {
    const auto& rec = sim->record(r);
    ASSERT_FALSE(rec.scores.empty());
    EXPECT_EQ(rec.scores.back().score, 1.5);
    EXPECT_EQ(rec.scores.size(), sim->record(0).scores.size());
    ASSERT_TRUE(rec.shutdown_cycle);
    EXPECT_EQ(*rec.shutdown_cycle, *sim->record(0).shutdown_cycle);
  }
}

TEST(GossipNegotiator, RefusesDuplicatesLocallyAndReRegistersChangedSpecs) {
  gossip_negotiator g(0, 1, negotiation_options{});
  time_point t{};
  auto a = g.local_ready(spec("w", {2}), t);
  ASSERT_EQ(a.batches.size(), 1u);  // one rank: agreed at once
  a = g.local_ready(spec("w", {3}), t + 1s);  // the name comes back with another shape
  EXPECT_TRUE(a.rejected.empty());
  ASSERT_EQ(a.assigned.size(), 1u);
  EXPECT_EQ(a.assigned[0].id, 1u);
  ASSERT_EQ(a.batches.size(), 1u);
  EXPECT_EQ(a.batches[0].ids, std::vector<uint32_t>{1});
  EXPECT_TRUE(g.registry().retired(0));
  gossip_negotiator h(0, 2, negotiation_options{});
  EXPECT_TRUE(h.local_ready(spec("v", {1}), t).rejected.empty());
  auto again = h.local_ready(spec("v", {1}), t).rejected;
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].error.code(), errc::invalid_argument);
  auto bad = h.local_ready(spec("b", {1}, dtype::f32, collective_kind::broadcast, reduce_op::sum, 2), t).rejected;
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].error.message(), "broadcast('b'): root 2 outside the job's ranks 0-1");
}

TEST(GossipNegotiator, AMessageFromTheWrongPeerStopsNegotiation) {
  gossip_negotiator g(2, 5, negotiation_options{});
  EXPECT_EQ(g.send_peer(0), 3);
  EXPECT_EQ(g.recv_peer(0), 1);
  EXPECT_EQ(g.send_peer(2), 1);
  EXPECT_EQ(g.recv_peer(2), 3);
  gossip_message m;
  m.cycle = 1;
  m.round = 1;
  m.from = 4;  // round 1 must come from rank 0
  auto a = g.on_message(m, time_point{});
  ASSERT_TRUE(a.fatal);
  EXPECT_EQ(a.fatal->code(), errc::protocol);
  EXPECT_EQ(a.fatal->message(), "gossip on rank 2: round 1 from rank 4 instead of rank 0");
  gossip_negotiator idle(2, 5, negotiation_options{});
  m.from = 0;
  m.cycle = 2;  // an idle rank that finished no cycle cannot hear of cycle 2
  auto b = idle.on_message(m, time_point{});
  ASSERT_TRUE(b.fatal);
  EXPECT_EQ(b.fatal->message(), "gossip on rank 2: cycle 2 from rank 0 while this rank finished cycle 0");
}

TEST(GossipNegotiator, TheCycleTimeIsALowerBoundOnSpacing) {
  negotiation_options nego;
  nego.cycle_time = 5ms;
  gossip_negotiator g(0, 1, nego);
  time_point t{};
  EXPECT_EQ(g.local_ready(spec("a", {1}), t).cycles.size(), 1u);
  auto b = g.local_ready(spec("b", {1}), t + 1ms);
  EXPECT_TRUE(b.cycles.empty());
  ASSERT_TRUE(b.wake_at);
  EXPECT_EQ(*b.wake_at, t + 5ms);
  EXPECT_TRUE(g.on_timer(t + 4ms).cycles.empty());
  EXPECT_EQ(g.on_timer(t + 5ms).cycles.size(), 1u);
}

TEST(GossipNegotiator, ABucketsWorthOfNewBytesStartsACycleWithoutWaitingOutTheCycleTime) {
  negotiation_options nego;
  nego.cycle_time = 5ms;
  nego.start_bytes = 400;  // 100 floats
  gossip_negotiator g(0, 1, nego);
  time_point t{};
  EXPECT_EQ(g.local_ready(spec("a", {1}), t).cycles.size(), 1u);  // idle: at once
  // 396 bytes new (first appearances, by name): they wait for the cycle time.
  EXPECT_TRUE(g.local_ready(spec("b", {60}), t + 1ms).cycles.empty());
  auto c = g.local_ready(spec("c", {39}), t + 1ms);
  EXPECT_TRUE(c.cycles.empty());
  ASSERT_TRUE(c.wake_at);
  EXPECT_EQ(*c.wake_at, t + 5ms);
  // Four more bytes: 400 wait, and the cycle starts now with all three.
  auto d = g.local_ready(spec("d", {1}), t + 2ms);
  ASSERT_EQ(d.cycles.size(), 1u);
  ASSERT_EQ(d.batches.size(), 1u);
  EXPECT_EQ(d.batches[0].ids.size(), 3u);
  // The count starts again after each contribution; registered names (sent as bits) count alike.
  EXPECT_TRUE(g.local_ready(spec("b", {60}), t + 3ms).cycles.empty());
  EXPECT_TRUE(g.local_ready(spec("c", {39}), t + 3ms).cycles.empty());
  EXPECT_EQ(g.local_ready(spec("a", {1}), t + 3ms).cycles.size(), 1u);
  // Off (0, as a fusion threshold of 0 sets it): even a large tensor waits out the cycle time.
  g.set_timing(nego.cycle_time, 0);
  EXPECT_TRUE(g.local_ready(spec("big", {1000}), t + 4ms).cycles.empty());
  EXPECT_TRUE(g.on_timer(t + 5ms).cycles.empty());
  // Switched on again, the next look at the ledger starts the cycle for what waits.
  g.set_timing(nego.cycle_time, 400);
  EXPECT_EQ(g.on_timer(t + 5ms + 1us).cycles.size(), 1u);
}

// Two gossip negotiators wired by hand: every message is delivered at once, in order.
struct hand_wired_pair {
  explicit hand_wired_pair(negotiation_options o) : ranks{gossip_negotiator(0, 2, o), gossip_negotiator(1, 2, o)} {}
  gossip_negotiator ranks[2];
  std::vector<uint32_t> agreed[2];  // ids, in agreed order
  int cycles[2] = {0, 0};

  /// Applies `a` (produced by rank `r` at `now`) and delivers what follows until quiet; returns
  /// the number of messages rank `r` sent in `a` itself.
  std::size_t pump(int r, actions a, time_point now) {
    std::size_t first = a.send.size();
    std::vector<std::pair<int, actions>> todo{{r, std::move(a)}};
    while (!todo.empty()) {
      auto [who, acts] = std::move(todo.back());
      todo.pop_back();
      cycles[who] += static_cast<int>(acts.cycles.size());
      for (auto& b : acts.batches) agreed[who].insert(agreed[who].end(), b.ids.begin(), b.ids.end());
      for (auto& m : acts.send) todo.push_back({m.to, ranks[m.to].on_message(m.message, now)});
    }
    return first;
  }
};

TEST(GossipNegotiator, ARankThatCaughtUpStartsAtOnceInsteadOfAfterTheCycleTime) {
  for (bool early : {true, false}) {
    SCOPED_TRACE(early ? "early_start" : "no early_start");
    negotiation_options o;
    o.cycle_time = 10ms;
    o.early_start = early;
    hand_wired_pair job(o);
    time_point t0{};
    auto x = spec("x", {4}), y = spec("y", {8});
    // The first cycles register x and y: both ranks have both before any message moves.
    actions first[2][2];
    for (int r : {0, 1}) {
      first[r][0] = job.ranks[r].local_ready(x, t0);
      first[r][1] = job.ranks[r].local_ready(y, t0);
    }
    for (int r : {0, 1})
      for (auto& a : first[r]) job.pump(r, std::move(a), t0);
    for (int r : {0, 1}) job.pump(r, job.ranks[r].on_timer(t0 + 10ms), t0 + 10ms);
    ASSERT_EQ(job.agreed[0].size(), 2u);
    ASSERT_EQ(job.agreed[1].size(), 2u);
    // Next cycle: rank 0 has x and y when its cycle time lets it start; rank 1 joins it with
    // nothing (its tensors are late).
    int joined = job.cycles[1];
    auto t1 = t0 + 20ms;
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t1 - 5ms), t1 - 5ms), 0u);
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(y, t1 - 5ms), t1 - 5ms), 0u);
    EXPECT_EQ(job.pump(0, job.ranks[0].on_timer(t1), t1), 1u);
    ASSERT_EQ(job.cycles[1], joined + 1);
    ASSERT_EQ(job.agreed[1].size(), 2u);
    // 100 µs later rank 1 has x, not yet y: rank 0 still waits for y, so no cycle starts.
    auto t2 = t1 + 100us;
    EXPECT_EQ(job.pump(1, job.ranks[1].local_ready(x, t2), t2), 0u);
    // Now y: rank 1 has caught up. Early: it starts cycle 3 at once and both agree x and y.
    // Without: it waits until its cycle time has passed since it joined cycle 2.
    auto t3 = t2 + 100us;
    auto a = job.ranks[1].local_ready(y, t3);
    ASSERT_TRUE(a.wake_at || !a.send.empty());
    if (!early) EXPECT_EQ(*a.wake_at, t1 + 10ms);
    EXPECT_EQ(job.pump(1, std::move(a), t3), early ? 1u : 0u);
    EXPECT_EQ(job.agreed[0].size(), early ? 4u : 2u);
    EXPECT_EQ(job.agreed[1].size(), early ? 4u : 2u);
    if (!early) {
      job.pump(1, job.ranks[1].on_timer(t1 + 10ms), t1 + 10ms);
      EXPECT_EQ(job.agreed[0].size(), 4u);
    }
    EXPECT_EQ(job.agreed[0], job.agreed[1]);
  }
}

// Registers x and y on both ranks of `job` (both have both before any message moves).
void register_both(hand_wired_pair& job, const tensor_spec& x, const tensor_spec& y, time_point t0,
                   duration cycle_time) {
  actions first[2];
  for (int r : {0, 1}) first[r] = job.ranks[r].local_ready_all({x, y}, t0);
  for (int r : {0, 1}) job.pump(r, std::move(first[r]), t0);
  for (int r : {0, 1}) job.pump(r, job.ranks[r].on_timer(t0 + cycle_time), t0 + cycle_time);
}

TEST(GossipNegotiator, ARankAheadHoldsBackABucketsWorthToo) {
  negotiation_options o;
  o.cycle_time = 10ms;
  o.hold_when_ahead = true;
  o.start_bytes = 400;
  hand_wired_pair job(o);
  auto x = spec("x", {4}), y = spec("y", {8}), big = spec("big", {1000});
  time_point t0{};
  register_both(job, x, y, t0, o.cycle_time);
  ASSERT_EQ(job.agreed[0].size(), 2u);
  // Rank 0 has x, rank 1 not yet: after this cycle rank 0 is ahead.
  auto t1 = t0 + 20ms;
  EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t1), t1), 1u);
  ASSERT_EQ(job.agreed[0].size(), 2u);
  // A bucket's worth on rank 0 starts nothing while it is ahead, at once or later.
  EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(big, t1 + 1ms), t1 + 1ms), 0u);
  EXPECT_EQ(job.pump(0, job.ranks[0].on_timer(t1 + 30ms), t1 + 30ms), 0u);
  // Rank 1 catches up with x and starts the cycle; rank 0 joins it with x and the big tensor.
  EXPECT_EQ(job.pump(1, job.ranks[1].local_ready(x, t1 + 31ms), t1 + 31ms), 1u);
  EXPECT_EQ(job.agreed[0].size(), 3u);  // x; "big" waits for rank 1
  EXPECT_EQ(job.agreed[0], job.agreed[1]);
}

TEST(GossipNegotiator, TensorsReadyTogetherShareACycle) {
  negotiation_options o;
  o.cycle_time = 1ms;
  hand_wired_pair job(o);
  auto x = spec("x", {4}), y = spec("y", {8});
  register_both(job, x, y, time_point{}, o.cycle_time);
  EXPECT_EQ(job.cycles[0], 1);
  EXPECT_EQ(job.agreed[0].size(), 2u);
  // One at a time, the second waits out the cycle time and needs a cycle of its own.
  auto t = time_point{} + 10ms;
  EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t), t), 1u);
  auto late = job.ranks[0].local_ready(y, t);
  EXPECT_TRUE(late.send.empty());
  ASSERT_TRUE(late.wake_at);
  EXPECT_EQ(*late.wake_at, t + 1ms);
}

TEST(GossipNegotiator, ARankAheadHoldsNewTensorsForTheCycleItsPeerStarts) {
  for (bool hold : {true, false}) {
    SCOPED_TRACE(hold ? "hold_when_ahead" : "without hold_when_ahead");
    negotiation_options o;
    o.cycle_time = 1ms;
    o.hold_when_ahead = hold;
    hand_wired_pair job(o);
    auto x = spec("x", {4}), y = spec("y", {8});
    time_point t0{};
    register_both(job, x, y, t0, o.cycle_time);
    int registered = job.cycles[0];
    // Rank 0 has x first: it starts a cycle, rank 1 joins it without x. Rank 0 is now ahead.
    auto t1 = t0 + 10ms;
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t1), t1), 1u);
    EXPECT_EQ(job.cycles[1], registered + 1);
    // Then y on rank 0. Ahead, it holds y: no cycle now, and none when its cycle time is up.
    // Without holding, it starts one for y once the cycle time is up (and learns rank 1 lacks y).
    auto t2 = t1 + 100us;
    auto a = job.ranks[0].local_ready(y, t2);
    EXPECT_TRUE(a.send.empty());
    if (hold) EXPECT_TRUE(!a.wake_at || *a.wake_at > t2 + 1s) << "a timer for a held tensor";
    job.pump(0, std::move(a), t2);
    EXPECT_EQ(job.pump(0, job.ranks[0].on_timer(t1 + 1ms), t1 + 1ms), hold ? 0u : 1u);
    // Rank 1 catches up with x and y at once: it starts a cycle, rank 0 joins it (with y if it
    // held it), and both tensors are agreed in that one cycle on both ranks.
    auto t3 = t1 + 5ms;
    EXPECT_EQ(job.pump(1, job.ranks[1].local_ready_all({x, y}, t3), t3), 1u);
    ASSERT_EQ(job.agreed[0].size(), 4u);
    EXPECT_EQ(job.agreed[0], job.agreed[1]);
    EXPECT_EQ(job.cycles[0], registered + (hold ? 2 : 3));
    EXPECT_EQ(job.cycles[1], job.cycles[0]);
    // Nobody is ahead now: a new tensor starts a cycle at once again.
    auto t4 = t3 + 10ms;
    EXPECT_EQ(job.pump(0, job.ranks[0].local_ready(x, t4), t4), 1u);
  }
}

TEST(GossipNegotiator, RanksAheadOfEachOtherNeverBothHold) {
  // Rank 0 waits for p, which rank 1 lacks; rank 1 waits for q, which rank 0 lacks. Neither is
  // ahead, so a tensor new on both (z) starts a cycle and is agreed, even though p and q are
  // still pending. (If both held z, neither would ever announce it.)
  negotiation_options o;
  o.cycle_time = 1ms;
  o.hold_when_ahead = true;
  hand_wired_pair job(o);
  auto p = spec("p", {1}), q = spec("q", {2}), z = spec("z", {3});
  time_point t0{};
  actions first[2];
  for (int r : {0, 1}) first[r] = job.ranks[r].local_ready_all({p, q, z}, t0);
  for (int r : {0, 1}) job.pump(r, std::move(first[r]), t0);
  ASSERT_EQ(job.agreed[0].size(), 3u);
  auto t1 = t0 + 10ms;
  job.pump(0, job.ranks[0].local_ready(p, t1), t1);
  auto t2 = t1 + 2ms;
  job.pump(1, job.ranks[1].local_ready(q, t2), t2);
  auto t3 = t2 + 2ms;
  job.pump(0, job.ranks[0].local_ready(z, t3), t3);
  job.pump(1, job.ranks[1].local_ready(z, t3 + 2ms), t3 + 2ms);
  for (int r : {0, 1}) job.pump(r, job.ranks[r].on_timer(t3 + 5ms), t3 + 5ms);
  ASSERT_EQ(job.agreed[0].size(), 4u);
  EXPECT_EQ(job.agreed[0], job.agreed[1]);
  EXPECT_EQ(job.ranks[0].registry().spec(job.agreed[0].back()).name, "z");
}

}  // namespace
}  // namespace chorus::negotiation
