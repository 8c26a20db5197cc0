// The central strategy (runtime/negotiation/central.hpp): the same scenarios as the gossip
// test, root message counts, and the same ids, batches and errors as gossip on the same
// inputs. Virtual clock, no threads; set CHORUS_TEST_SEED to re-run a printed seed.
#include "runtime/negotiation/central.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>

#include "runtime/negotiation/gossip.hpp"
#include "runtime/negotiation/simulator.hpp"
#include "tests/support/negotiation_sim.hpp"

namespace chorus::negotiation {
namespace {

using namespace std::chrono_literals;
using chorus::testing::make_sim;
using chorus::testing::spec;

uint64_t test_seed(uint64_t fallback) {
  const char* env = std::getenv("CHORUS_TEST_SEED");
  uint64_t seed = env ? std::strtoull(env, nullptr, 10) : fallback;
  std::cout << "seed=" << seed << " (CHORUS_TEST_SEED=" << seed << " re-runs it)\n";
  return seed;
}

std::vector<tensor_spec> model(int count) {
  std::vector<tensor_spec> out;
  for (int i = 0; i < count; ++i) {
    auto s = spec("layer" + std::to_string(i) + ".weight", {64 * (i + 1), 32}, i % 3 == 0 ? dtype::f16 : dtype::f32);
    if (i % 5 == 4) s.kind = collective_kind::broadcast, s.root = 0;
    out.push_back(s);
  }
  return out;
}

void run_step(simulator& sim, const std::vector<tensor_spec>& tensors, std::mt19937_64& rng) {
  int n = sim.size();
  std::vector<std::vector<tensor_spec>> order(n, tensors);
  for (auto& o : order) std::shuffle(o.begin(), o.end(), rng);
  std::vector<std::size_t> next(n, 0);
  for (std::size_t left = tensors.size() * n; left > 0; --left) {
    int r;
    do r = static_cast<int>(rng() % n); while (next[r] == tensors.size());
    sim.enqueue(r, order[r][next[r]++]);
    sim.run_for(std::chrono::microseconds(rng() % 150));
  }
  ASSERT_TRUE(sim.run_until_idle()) << "negotiation did not finish";
}

TEST(CentralNegotiator, EveryRankAgreesAndRankZeroHandlesAtMostThreeMessagesPerWorker) {
  auto base = test_seed(4321);
  for (int n = 1; n <= 17; ++n) {
    uint64_t seed = base + n;
    SCOPED_TRACE("ranks=" + std::to_string(n) + " seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    negotiation_options nego;
    nego.cycle_time = 100us;
    auto sim = make_sim("central", n, seed, nego);
    auto tensors = model(10);
    for (int s = 0; s < 3; ++s) run_step(*sim, tensors, rng);
    EXPECT_EQ(sim->divergence(), "");
    ASSERT_EQ(sim->record(0).assigned.size(), tensors.size());
    std::map<uint32_t, int> times;
    for (const auto& b : sim->record(0).batches)
      for (auto id : b.ids) ++times[id];
    for (uint32_t id = 0; id < tensors.size(); ++id) EXPECT_EQ(times[id], 3);
    for (const auto& c : sim->record(0).cycles) {
      EXPECT_EQ(c.messages_received, static_cast<uint32_t>(n - 1));  // one report per worker
      EXPECT_GE(c.messages_sent, static_cast<uint32_t>(n - 1));      // answers
      EXPECT_LE(c.messages_sent + c.messages_received, static_cast<uint32_t>(3 * (n - 1)));
    }
    for (int r = 1; r < n; ++r) {
      ASSERT_EQ(sim->record(r).cycles.size(), sim->record(0).cycles.size());
      for (const auto& c : sim->record(r).cycles) EXPECT_EQ(c.messages_sent, 1u);
    }
  }
}

TEST(CentralNegotiator, BusyWorkersCostRankZeroTwoMessagesEach) {
  auto sim = make_sim("central", 8, test_seed(3));
  // Every worker reports before rank 0 opens the cycle on its own: no polls.
  for (int r = 1; r < 8; ++r) sim->enqueue(r, spec("t", {4}));
  ASSERT_TRUE(sim->run_until_idle());
  sim->enqueue(0, spec("t", {4}));
  ASSERT_TRUE(sim->run_until_idle());
  const auto& cycles = sim->record(0).cycles;
  ASSERT_EQ(cycles.size(), 2u);
  EXPECT_EQ(cycles[0].messages_sent + cycles[0].messages_received, 2u * 7u);
  EXPECT_EQ(sim->divergence(), "");
  EXPECT_EQ(sim->record(5).batches.size(), 1u);
}

TEST(CentralNegotiator, ContributionCycleIsTheCycleATensorReadyNowJoins) {
  auto sim = make_sim("central", 3, test_seed(5));
  sim->enqueue(1, spec("x", {8}));  // worker 1 reports for cycle 1 at once
  EXPECT_EQ(sim->strategy(1).contribution_cycle(), 2u);
  EXPECT_EQ(sim->strategy(2).contribution_cycle(), 1u);
  ASSERT_TRUE(sim->run_until_idle());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(sim->strategy(r).contribution_cycle(), 2u);
}

TEST(CentralNegotiator, AnIdleJobSendsNothingAndIdleWorkersArePolled) {
  negotiation_options nego;
  nego.stall_warning_time = duration::zero();
  auto sim = make_sim("central", 9, test_seed(11), nego);
  sim->run_for(5s);
  EXPECT_EQ(sim->messages_total(), 0u);
  sim->enqueue(4, spec("x", {8}));
  ASSERT_TRUE(sim->run_until_idle());
  // rank 4's report, 7 polls, 7 reports, 8 answers.
  EXPECT_EQ(sim->messages_total(), 1u + 7u + 7u + 8u);
  for (int r = 0; r < 9; ++r) EXPECT_EQ(sim->strategy(r).cycles_done(), 1u);
  sim->run_for(10s);
  EXPECT_EQ(sim->messages_total(), 23u);
}

TEST(CentralNegotiator, MismatchAndStallTextsMatchGossip) {
  negotiation_options nego;
  nego.stall_warning_time = 1s;
  nego.stall_shutdown_time = 3s;
  auto seed = test_seed(17);
  std::vector<std::unique_ptr<simulator>> sims;
  for (const char* strategy : {"gossip", "central"}) {
    auto sim = make_sim(strategy, 4, seed, nego);
    for (int r : {3, 1, 0, 2}) sim->enqueue(r, spec("fc1.weight", {512, r == 3 ? 256 : 128}));
    ASSERT_TRUE(sim->run_until_idle());
    for (int r : {0, 1}) sim->enqueue(r, spec("late", {2}));
    ASSERT_TRUE(sim->run_until_idle());
    sim->run_for(4s);
    EXPECT_EQ(sim->divergence(), "");
    sims.push_back(std::move(sim));
  }
  for (const auto& sim : sims) {
    const auto& rec = sim->record(2);
    SCOPED_TRACE(sim->strategy(0).strategy_name());
    ASSERT_EQ(rec.errors.size(), 1u);
    EXPECT_EQ(rec.errors[0].message, "allreduce('fc1.weight'): shape [512,256] on rank 3 but [512,128] on ranks 0-2");
    ASSERT_EQ(rec.warnings.size(), 1u);
    EXPECT_EQ(rec.warnings[0].message,
              "stall: allreduce('late'): ready on ranks 0-1 but not produced by ranks 2-3 after 1 s "
              "(CHORUS_STALL_CHECK_TIME_SECONDS)");
    ASSERT_TRUE(rec.fatal);
    EXPECT_EQ(rec.fatal->message(),
              "stall: allreduce('late'): ready on ranks 0-1 but not produced by ranks 2-3 after 3 s; "
              "stopping the job (CHORUS_STALL_SHUTDOWN_TIME_SECONDS)");
  }
}

// Phases of enqueues: within a phase every enqueue happens before any message moves, so each
// rank's contribution to each cycle is fixed by the inputs alone, whatever the strategy.
using phase = std::vector<std::pair<int, tensor_spec>>;

std::vector<phase> random_phases(int n, std::mt19937_64& rng) {
  auto tensors = model(9);
  tensors.push_back(spec("odd", {7}));
  std::vector<phase> phases(12);
  for (auto& p : phases) {
    for (int k = static_cast<int>(rng() % (3 * n + 1)); k > 0; --k) {
      int r = static_cast<int>(rng() % n);
      auto s = tensors[rng() % tensors.size()];
      if (s.name == "odd" && r == n - 1 && n > 1) s.shape = {8};  // a mismatch, now and then
      p.push_back({r, s});
    }
  }
  // A last phase in which everyone enqueues everything still missing somewhere.
  phases.emplace_back();
  for (int r = 0; r < n; ++r)
    for (const auto& s : tensors) phases.back().push_back({r, s});
  return phases;
}

TEST(CentralNegotiator, SameIdsBatchesAndErrorsAsGossipOnTheSameInputs) {
  auto base = test_seed(777);
  std::size_t errors_seen = 0, batches_seen = 0;
  for (int n : {1, 2, 3, 4, 5, 7, 8, 12, 16, 17}) {
    for (uint64_t trial = 0; trial < 3; ++trial) {
      uint64_t seed = base + 10 * n + trial;
      SCOPED_TRACE("ranks=" + std::to_string(n) + " seed=" + std::to_string(seed));
      std::mt19937_64 rng(seed);
      auto phases = random_phases(n, rng);
      negotiation_options nego;
      nego.cycle_time = duration::zero();
      std::vector<std::unique_ptr<simulator>> sims;
      for (const char* strategy : {"gossip", "central"}) {
        auto sim = make_sim(strategy, n, seed + 1, nego);  // each delivers in its own random order
        for (const auto& p : phases) {
          for (const auto& [r, s] : p) sim->enqueue(r, s);
          ASSERT_TRUE(sim->run_until_idle());
        }
        EXPECT_EQ(sim->divergence(), "");
        sims.push_back(std::move(sim));
      }
      const auto& g = sims[0]->record(0);
      const auto& c = sims[1]->record(0);
      ASSERT_EQ(g.assigned.size(), c.assigned.size());
      for (std::size_t i = 0; i < g.assigned.size(); ++i) {
        EXPECT_EQ(g.assigned[i].name, c.assigned[i].name);
        EXPECT_EQ(g.assigned[i].id, c.assigned[i].id);
      }
      ASSERT_EQ(g.batches.size(), c.batches.size());
      for (std::size_t i = 0; i < g.batches.size(); ++i) {
        EXPECT_EQ(g.batches[i].cycle, c.batches[i].cycle);
        EXPECT_EQ(g.batches[i].ids, c.batches[i].ids);
      }
      ASSERT_EQ(g.errors.size(), c.errors.size());
      for (std::size_t i = 0; i < g.errors.size(); ++i) EXPECT_EQ(g.errors[i].message, c.errors[i].message);
      EXPECT_EQ(g.rejected.size(), c.rejected.size());
      EXPECT_EQ(g.cycles.size(), c.cycles.size());
      errors_seen += g.errors.size();
      batches_seen += g.batches.size();
    }
  }
  EXPECT_GT(errors_seen, 0u);  // the inputs did exercise mismatches
  EXPECT_GT(batches_seen, 100u);
}

// The scale simulator's question: N = 1024, 20 us links, 2 us of work per message handled.
TEST(CentralNegotiator, AtScaleGossipCyclesAreTenTimesFasterThanCentralOnes) {
  const int n = 1024;
  std::vector<double> cycle_us;
  for (const char* strategy : {"gossip", "central"}) {
    simulator_options o;
    o.strategy = strategy;
    o.min_latency = o.max_latency = 20us;
    o.processing_time = 2us;
    auto sim = std::move(simulator::create(n, o).value());
    auto tensors = model(24);
    for (int step = 0; step < 2; ++step) {
      for (int r = 0; r < n; ++r)
        for (const auto& t : tensors) sim->enqueue(r, t);
      ASSERT_TRUE(sim->run_until_idle(100s));
    }
    EXPECT_EQ(sim->divergence(), "");
    EXPECT_GE(sim->record(0).batches.size(), 2u);
    double worst = 0;
    uint32_t most_messages = 0;
    for (int r = 0; r < n; ++r) {
      for (const auto& c : sim->record(r).cycles) {
        worst = std::max(worst, std::chrono::duration<double, std::micro>(c.finished - c.started).count());
        most_messages = std::max(most_messages, c.messages_sent + c.messages_received);
      }
    }
    std::cout << strategy << ": slowest cycle " << worst << " us, most messages at one rank in one cycle "
              << most_messages << "\n";
    if (std::string(strategy) == "gossip") {
      EXPECT_EQ(most_messages, 2u * 10u);  // 2 ceil(log2 N)
    } else {
      EXPECT_EQ(most_messages, 2u * (n - 1));  // a busy job: reports and answers, no polls
    }
    cycle_us.push_back(worst);
  }
  EXPECT_GE(cycle_us[1], 10 * cycle_us[0]);
}

TEST(CentralNegotiator, FactoryPicksByName) {
  auto g = make_strategy("gossip", 0, 3, {});
  auto c = make_strategy("central", 2, 3, {});
  ASSERT_TRUE(g.ok() && c.ok());
  EXPECT_EQ(g.value()->strategy_name(), "gossip");
  EXPECT_EQ(c.value()->strategy_name(), "central");
  auto bad = make_strategy("ring", 0, 3, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), errc::config);
  EXPECT_FALSE(make_strategy("central", 3, 3, {}).ok());
}

TEST(CentralNegotiator, AnUnexpectedAnswerStopsNegotiation) {
  central_negotiator w(1, 3, negotiation_options{});
  gossip_message m;
  m.kind = message_kind::answer;
  m.cycle = 1;
  m.from = 0;
  auto a = w.on_message(m, time_point{});
  ASSERT_TRUE(a.fatal);
  EXPECT_EQ(a.fatal->code(), errc::protocol);
}

}  // namespace
}  // namespace chorus::negotiation
