// Negotiator actors of N ranks wired to each other in one actor system, driven message by
// message by CAF's test coordinator (scheduler.policy "testing", a virtual clock, no sleeps).
// Every rank must reach the same agreed batches; mismatches, stall shutdown, a lost peer and
// stop end ops with errors. Randomised tests print their seed; CHORUS_TEST_SEED re-runs one.
#include "actors/negotiator_actor.hpp"
#include "tests/actors/negotiator_fixture.hpp"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <set>

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace chorus::test;

uint64_t test_seed(uint64_t fallback) {
  const char* env = std::getenv("CHORUS_TEST_SEED");
  uint64_t seed = env ? std::strtoull(env, nullptr, 10) : fallback;
  std::cout << "seed=" << seed << " (CHORUS_TEST_SEED=" << seed << " re-runs it)\n";
  return seed;
}

class negotiator_ranks : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(negotiator_ranks, every_rank_agrees_on_the_same_batches) {
  auto [n, strategy] = GetParam();
  std::mt19937_64 rng(test_seed(static_cast<uint64_t>(n) * 7919 + strategy.size()));
  ranks_fixture f(n, strategy);
  const int tensors = 24, steps = 3;
  for (int step = 0; step < steps; ++step) {
    // Every rank enqueues every tensor in its own order, with random message traffic and
    // clock movement in between: tensors become ready in different cycles on different ranks.
    std::vector<std::vector<int>> order(static_cast<std::size_t>(n));
    for (auto& o : order) {
      for (int t = 0; t < tensors; ++t) o.push_back(t);
      std::shuffle(o.begin(), o.end(), rng);
    }
    std::vector<std::size_t> next(static_cast<std::size_t>(n), 0);
    int left = n * tensors;
    while (left > 0) {
      int r = static_cast<int>(rng() % static_cast<uint64_t>(n));
      if (next[r] == order[r].size()) continue;
      int t = order[r][next[r]++];
      f.ready(r, spec("grad" + std::to_string(t), {t + 1, 3}, t % 2 ? dtype::f32 : dtype::f64));
      --left;
      for (auto k = rng() % 6; k > 0 && f.sched->try_run_once(); --k) {
      }
      if (rng() % 4 == 0) f.sched->advance_time(std::chrono::microseconds(rng() % 1500));
    }
    f.settle();
  }
  auto reference = f.batches(0);
  std::multiset<std::string> agreed;
  for (auto& b : reference) agreed.insert(b.begin(), b.end());
  EXPECT_EQ(agreed.size(), static_cast<std::size_t>(tensors * steps));
  for (int t = 0; t < tensors; ++t) EXPECT_EQ(agreed.count("grad" + std::to_string(t)), static_cast<std::size_t>(steps));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(f.batches(r), reference) << "rank " << r << " agreed different batches than rank 0";
    EXPECT_TRUE(f.sink(r).finished.empty()) << "rank " << r << ": " << f.sink(r).finished.front().result.to_string();
    EXPECT_TRUE(f.neg(r).pending.empty());
    // Ids are identical on every rank.
    const auto& reg0 = f.neg(0).strategy->registry();
    const auto& reg = f.neg(r).strategy->registry();
    ASSERT_EQ(reg.size(), reg0.size());
    for (uint32_t id = 0; id < reg.size(); ++id) EXPECT_EQ(reg.spec(id).name, reg0.spec(id).name);
  }
  auto st = summarize(f.neg(0));
  EXPECT_EQ(st.agreed_ops, static_cast<uint64_t>(tensors * steps));
  EXPECT_GT(st.cycles, 0u);
  if (n > 1) EXPECT_GT(st.messages_sent, 0u);
}

std::vector<std::tuple<int, std::string>> rank_counts() {
  std::vector<std::tuple<int, std::string>> out;
  for (int n = 1; n <= 17; ++n) out.emplace_back(n, "gossip");
  for (int n : {1, 2, 3, 5, 8, 17}) out.emplace_back(n, "central");
  return out;
}

INSTANTIATE_TEST_SUITE_P(all, negotiator_ranks, ::testing::ValuesIn(rank_counts()),
                         [](const auto& info) {
                           return std::get<1>(info.param) + "_" + std::to_string(std::get<0>(info.param));
                         });

TEST(negotiator_actor, shape_mismatch_ends_the_op_on_every_rank_with_the_same_text) {
  for (std::string strategy : {"gossip", "central"}) {
    ranks_fixture f(3, strategy);
    f.ready(0, spec("fc1.weight", {512, 128}));
    f.ready(1, spec("fc1.weight", {512, 256}));
    f.ready(2, spec("fc1.weight", {512, 128}));
    f.ready(0, spec("fc1.bias", {128}));
    f.ready(1, spec("fc1.bias", {128}));
    f.ready(2, spec("fc1.bias", {128}));
    f.settle();
    std::string text;
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(f.sink(r).finished.size(), 1u) << strategy << " rank " << r;
      const auto& e = f.sink(r).finished.front().result;
      EXPECT_EQ(e.code(), errc::mismatch);
      if (r == 0) text = e.message();
      EXPECT_EQ(e.message(), text);
      EXPECT_EQ(f.batches(r), (std::vector<std::vector<std::string>>{{"fc1.bias"}})) << strategy;
    }
    EXPECT_NE(text.find("fc1.weight"), std::string::npos) << text;
    EXPECT_NE(text.find("[512,256]"), std::string::npos) << text;
  }
}

TEST(negotiator_actor, a_name_comes_back_with_another_shape_and_disagreement_is_a_mismatch) {
  for (std::string strategy : {"gossip", "central"}) {
    SCOPED_TRACE(strategy);
    ranks_fixture f(3, strategy);
    auto shapes_of_last_batch = [&](int r) {
      std::vector<std::vector<int64_t>> out;
      for (auto& o : f.sink(r).batches.back().ops) out.push_back(o.spec.shape);
      return out;
    };
    // 1. Every rank: x with [3], then x with [4] (re-registered), agreed with its spec.
    for (std::vector<int64_t> shape : {std::vector<int64_t>{3}, std::vector<int64_t>{4}}) {
      for (int r = 0; r < 3; ++r) f.ready(r, spec("x", shape));
      f.settle();
      for (int r = 0; r < 3; ++r) {
        ASSERT_FALSE(f.sink(r).batches.empty());
        EXPECT_EQ(shapes_of_last_batch(r), std::vector<std::vector<int64_t>>{shape}) << "rank " << r;
        EXPECT_TRUE(f.sink(r).finished.empty()) << "rank " << r;
        EXPECT_TRUE(f.neg(r).pending.empty());
      }
    }
    // 2. Rank 2 goes on with [5]; ranks 0 and 1 keep [4] (their ops travel by id): every rank
    //    ends its op with the same mismatch, nothing stays pending.
    f.ready(0, spec("x", {4}));
    f.ready(1, spec("x", {4}));
    f.settle();
    f.ready(2, spec("x", {5}));
    f.settle();
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(f.sink(r).finished.size(), 1u) << "rank " << r;
      const auto& e = f.sink(r).finished.front().result;
      EXPECT_EQ(e.code(), errc::mismatch);
      EXPECT_EQ(e.message(), "allreduce('x'): shape [5] on rank 2 but [4] on ranks 0-1") << "rank " << r;
      EXPECT_TRUE(f.neg(r).pending.empty());
      EXPECT_EQ(f.sink(r).batches.size(), 2u);
    }
    // 3. Then [5] everywhere: agreed, with identical ids on every rank.
    for (int r = 0; r < 3; ++r) f.ready(r, spec("x", {5}));
    f.settle();
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(f.sink(r).batches.size(), 3u);
      EXPECT_EQ(shapes_of_last_batch(r), std::vector<std::vector<int64_t>>{{5}}) << "rank " << r;
      const auto& reg = f.neg(r).strategy->registry();
      EXPECT_EQ(reg.find("x"), f.neg(0).strategy->registry().find("x"));
      EXPECT_EQ(reg.size(), 2u);  // x's first id, retired by [4], was handed out again to [5]
      EXPECT_EQ(reg.retired_count(), 2u);
    }
  }
}

TEST(negotiator_actor, stall_shutdown_fails_the_op_on_every_rank_that_has_it) {
  negotiation::negotiation_options o;
  o.stall_warning_time = 1s;
  o.stall_shutdown_time = 3s;
  ranks_fixture f(3, "gossip", o);
  f.ready(0, spec("only.on.rank0", {4}));
  f.sched->run();
  for (int i = 0; i < 10; ++i) {
    f.sched->advance_time(1s);
    f.sched->run();
  }
  f.settle();
  ASSERT_EQ(f.sink(0).finished.size(), 1u);
  const auto& e = f.sink(0).finished.front().result;
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.message().find("only.on.rank0"), std::string::npos) << e.message();
  // Negotiation has stopped everywhere: a new op fails at once, naming the cause.
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(f.neg(r).failed.ok()) << "rank " << r;
  f.ready(1, spec("late", {1}));
  f.settle();
  ASSERT_EQ(f.sink(1).finished.size(), 1u);
  EXPECT_NE(f.sink(1).finished.front().result.message().find("late"), std::string::npos);
}

TEST(negotiator_actor, a_lost_peer_fails_pending_ops_naming_it) {
  ranks_fixture f(3, "gossip");
  f.ready(0, spec("w", {8}));
  f.ready(1, spec("w", {8}));
  f.sched->run();
  caf::anon_send_exit(f.negotiators[2], caf::exit_reason::kill);
  f.settle();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(f.sink(r).finished.size(), 1u) << "rank " << r;
    const auto& e = f.sink(r).finished.front().result;
    EXPECT_EQ(e.code(), errc::connection_lost);
    EXPECT_NE(e.message().find("rank 2"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("allreduce('w')"), std::string::npos) << e.message();
  }
}

TEST(negotiator_actor, a_gossip_over_the_link_limit_stops_every_rank_naming_the_sender) {
  // Two ranks on a modelled control link that carries at most 64 bytes per message, as the
  // TCP control link carries at most its frame limit: a message over it would never arrive.
  std::vector<caf::actor>* peers = nullptr;
  std::vector<std::string> lost(2);
  auto link = [&](negotiator_config& c) {
    c.max_control_bytes = 64;
    c.on_peer_lost = [&lost, r = c.rank](const status& why) { lost[static_cast<std::size_t>(r)] = why.message(); };
    c.send_control = [&peers](int to, control_kind kind, int origin, std::span<const uint8_t> data) {
      auto& to_actor = (*peers)[static_cast<std::size_t>(to)];
      if (kind == control_kind::gossip)
        caf::anon_send(to_actor, gossip_bytes{std::vector<uint8_t>(data.begin(), data.end())});
      else
        caf::anon_send(to_actor, gone_atom::value, origin, std::string(data.begin(), data.end()));
      return true;
    };
  };
  ranks_fixture f(2, "gossip", {}, link);
  peers = &f.negotiators;
  f.ready(0, spec("short", {4}));
  f.ready(1, spec("short", {4}));
  f.settle();
  ASSERT_EQ(f.batches(0), (std::vector<std::vector<std::string>>{{"short"}})) << "small gossip still flows";
  ASSERT_EQ(f.batches(1), f.batches(0));
  const std::string long_name(200, 'g');
  f.ready(0, spec(long_name, {4}));  // rank 0 announces it first: its gossip carries the name
  f.ready(1, spec(long_name, {4}));
  f.settle();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(f.sink(r).finished.size(), 1u) << "rank " << r << " must not wait for a message that never comes";
    const auto& e = f.sink(r).finished.front().result;
    EXPECT_FALSE(e.ok());
    EXPECT_NE(e.message().find("rank 0's gossip to rank 1 is"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("over the control link's limit of 64"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(long_name), std::string::npos) << "names the tensor: " << e.message();
    EXPECT_NE(lost[static_cast<std::size_t>(r)].find("rank 0's gossip"), std::string::npos)
        << "rank " << r << " breaks its data plane with the cause: '" << lost[static_cast<std::size_t>(r)] << "'";
  }
  f.ready(1, spec("after", {4}));
  f.settle();
  ASSERT_EQ(f.sink(1).finished.size(), 2u);
  EXPECT_NE(f.sink(1).finished.back().result.message().find("rank 0's gossip"), std::string::npos)
      << "a later op ends with the same cause";
}

TEST(negotiator_actor, ops_that_arrive_together_share_one_cycle) {
  // A layer's weight and bias are enqueued microseconds apart: both are in the mailbox when the
  // negotiator runs, and it hands them to the strategy together, so the cycle that the first
  // starts takes the second too (one cycle, one batch) instead of the second waiting out the
  // cycle time for a cycle of its own.
  negotiation::negotiation_options o;
  o.cycle_time = 1ms;
  ranks_fixture f(2, "gossip", o);
  for (int r : {0, 1}) {
    f.ready(r, spec("layer.weight", {8, 4}));
    f.ready(r, spec("layer.bias", {8}));
  }
  f.settle();
  for (int r : {0, 1}) {
    EXPECT_EQ(f.batches(r), (std::vector<std::vector<std::string>>{{"layer.bias", "layer.weight"}})) << "rank " << r;
    EXPECT_EQ(f.neg(r).stats.cycles, 1u) << "rank " << r;
  }
}

TEST(negotiator_actor, stop_fails_what_is_pending_and_everything_after) {
  ranks_fixture f(2, "gossip");
  f.ready(0, spec("a", {8}));
  f.settle();
  caf::anon_send(f.negotiators[0], stop_atom::value);
  f.ready(0, spec("b", {8}));
  f.settle();
  auto& done = f.sink(0).finished;
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].result.code(), errc::shutdown);
  EXPECT_EQ(done[0].result.message(), "allreduce('a'): shut down with 'a' pending");
  EXPECT_EQ(done[1].result.code(), errc::shutdown);
  EXPECT_NE(done[1].result.message().find("allreduce('b')"), std::string::npos);
}

TEST(negotiator_actor, gossip_produced_before_peers_connect_is_sent_once_they_do) {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  std::vector<caf::actor> negs, sinks;
  for (int r = 0; r < 2; ++r) {
    negotiator_config c;
    c.rank = r;
    c.size = 2;
    negs.push_back(sys.spawn(negotiator_actor, c));
    sinks.push_back(sys.spawn<::chorus::test::class_actor<sink_state, sink_actor>>());
    caf::anon_send(negs.back(), negotiator_wiring{sinks.back(), sinks.back(), {}, nullptr});
  }
  op_ref o;
  o.spec = spec("x", {2});
  caf::anon_send(negs[0], tensor_ready{o});
  caf::anon_send(negs[1], tensor_ready{o});
  sched.run();
  EXPECT_FALSE(state_of<negotiator_state>(negs[0]).unsent.empty());
  for (auto& n : negs) caf::anon_send(n, peers_connected{negs});
  sched.run();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(state_of<sink_state>(sinks[r]).batches.size(), 1u);
  for (auto& a : negs) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& a : sinks) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  sched.run();
}

}  // namespace
}  // namespace chorus
