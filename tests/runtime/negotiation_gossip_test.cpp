// The gossip negotiator (runtime/negotiation/gossip.hpp), driven by the virtual-clock network
// of runtime/negotiation/simulator.hpp: no threads, no sleeps. Agreement for 1-17 ranks,
// mismatches, stall warnings and shutdowns, scores, local refusals and protocol errors; the
// cycle timing (cycle time, start bytes, early start, holding when ahead) is in
// negotiation_gossip_timing_test.cpp. Randomised tests print their seed; set CHORUS_TEST_SEED
// to re-run one.
#include "runtime/negotiation/gossip.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>

#include "runtime/negotiation/simulator.hpp"
#include "tests/support/negotiation_sim.hpp"

namespace chorus::negotiation {
namespace {

using namespace std::chrono_literals;
using chorus::testing::spec;

uint64_t test_seed(uint64_t fallback) {
  uint64_t seed = std::getenv("CHORUS_TEST_SEED") ? std::strtoull(std::getenv("CHORUS_TEST_SEED"), nullptr, 10) : fallback;
  std::cout << "seed=" << seed << " (CHORUS_TEST_SEED=" << seed << " re-runs it)\n";
  return seed;
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

}  // namespace
}  // namespace chorus::negotiation
