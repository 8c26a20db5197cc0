// Priority (CHORUS_PRIORITY, actors/fusion_actor.hpp): a batch is planned in priority order,
// chunks carry their bucket's priority (0 on the mailbox lane), a later chunk of larger
// priority overtakes the rest of a big bucket at a chunk boundary, and two ranks whose
// batches, hand-outs and chunk ends interleave at random still run every chunk (the start
// rules of sender_actor.hpp under runs_before), with the fake data plane ending a chunk only
// once both ranks started it.
#include "actors/fusion_actor.hpp"
#include "actors/sender_actor.hpp"
#include "tests/actors/class_actor.hpp"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <deque>
#include <map>
#include <random>
#include <set>

namespace chorus {
namespace {

template <class State>
State& state_of(const caf::actor& a) {
  return dynamic_cast<caf::stateful_actor<State>&>(*caf::actor_cast<caf::abstract_actor*>(a)).state;
}

/// Buffers for ops: f32 tensors that live as long as the test.
struct tensors {
  std::deque<std::vector<float>> data;
  op_ref op(const std::string& name, std::size_t bytes, int32_t priority) {
    data.emplace_back(bytes / 4, 1.0f);
    op_ref o;
    o.spec.name = name;
    o.spec.kind = collective_kind::allreduce;
    o.spec.type = dtype::f32;
    o.spec.shape = {static_cast<int64_t>(bytes / 4)};
    o.spec.op = reduce_op::sum;
    o.spec.priority = priority;
    o.input = o.output = data.back().data();
    return o;
  }
};

fusion_config small_config() {
  fusion_config fc;
  fc.size = 2;
  fc.fusion_threshold = 1u << 20;
  fc.chunk_bytes = 64u << 10;
  fc.in_place_bytes = 256u << 10;
  fc.pool_bytes = 8u << 20;
  fc.pre_touch = false;
  return fc;
}

std::vector<std::string> member_names(const bucket_job& job) {
  std::vector<std::string> out;
  for (const auto& op : job.ops) out.push_back(op.spec.name);
  return out;
}

TEST(priority_plan, a_batch_is_fused_in_priority_order_and_chunks_carry_the_largest) {
  tensors t;
  batch_agreed b{1, {t.op("a", 1024, 1), t.op("b", 1024, 5), t.op("c", 1024, 3), t.op("d", 1024, 5)}};
  fusion_state s;
  s.cfg = small_config();
  s.next_sequence = s.cfg.first_sequence;
  auto planned = plan_batch(s, b);
  ASSERT_EQ(planned.size(), 1u);
  EXPECT_EQ(member_names(*planned[0].first), (std::vector<std::string>{"b", "d", "c", "a"}));  // ties keep the agreed order
  for (const auto& w : planned[0].second) EXPECT_EQ(w.priority, 5);

  fusion_state off;
  off.cfg = small_config();
  off.cfg.priority = false;
  off.next_sequence = off.cfg.first_sequence;
  auto agreed = plan_batch(off, b);
  ASSERT_EQ(agreed.size(), 1u);
  EXPECT_EQ(member_names(*agreed[0].first), (std::vector<std::string>{"a", "b", "c", "d"}));
  for (const auto& w : agreed[0].second) EXPECT_EQ(w.priority, 0);

  // The mailbox lane runs chunks in hand-out order: there they keep priority 0 (the batch is
  // still fused in priority order, which is the same on every rank).
  fusion_state lane;
  lane.cfg = small_config();
  lane.cfg.direct_max_bytes = 1u << 20;
  lane.next_sequence = lane.cfg.first_sequence;
  auto on_lane = plan_batch(lane, b);
  ASSERT_EQ(on_lane.size(), 1u);
  EXPECT_EQ(member_names(*on_lane[0].first), (std::vector<std::string>{"b", "d", "c", "a"}));
  for (const auto& w : on_lane[0].second) EXPECT_EQ(w.priority, 0);
}

TEST(priority_plan, runs_before_is_priority_then_sequence) {
  EXPECT_TRUE(runs_before(5, 100, 1, 7));
  EXPECT_FALSE(runs_before(1, 7, 5, 100));
  EXPECT_TRUE(runs_before(3, 7, 3, 8));
  EXPECT_FALSE(runs_before(3, 8, 3, 8));
  EXPECT_TRUE(runs_before(0, 9, -1, 1));
}

// ---- one rank: fusion's hand-out order ----

struct handout_state {
  std::vector<chunk_work> chunks;  // handed out, in order
};
caf::behavior handout_sink(caf::stateful_actor<handout_state>* self) {
  return {[=](chunk_work& w) { self->state.chunks.push_back(std::move(w)); }, [=](const bucket_planned&) {}};
}

TEST(priority_fusion, a_later_bucket_of_larger_priority_overtakes_the_rest_of_a_big_one) {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto fc = small_config();
  fc.start_window = 2;
  auto fusion = sys.spawn(fusion_actor, fc);
  auto sink = sys.spawn<test::class_actor<handout_state, handout_sink>>();
  caf::anon_send(fusion, fusion_wiring{sink, {sink}, nullptr, nullptr});
  tensors t;
  caf::anon_send(fusion, batch_agreed{1, {t.op("big", 512u << 10, 0)}});  // in place, 8 chunks of 64 KiB
  sched.run();
  auto& out = state_of<handout_state>(sink).chunks;
  ASSERT_EQ(out.size(), 2u);  // the window
  const uint64_t big = out[0].sequence;
  caf::anon_send(fusion, batch_agreed{2, {t.op("first.layer", 256u << 10, 9)}});  // 4 chunks
  sched.run();
  // It runs before everything handed out: its first chunk goes at once, past the window.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].priority, 9);
  const uint64_t first = out[2].sequence;
  EXPECT_EQ(first, big + 8);
  // Each end frees one place; the rest of the later bucket goes before the big one's rest.
  for (uint64_t end : {big, big + 1, first, first + 1, first + 2, first + 3, big + 2, big + 3, big + 4, big + 5}) {
    caf::anon_send(fusion, chunk_ended{end});
    sched.run();
  }
  std::vector<uint64_t> order;
  for (const auto& w : out) order.push_back(w.sequence);
  EXPECT_EQ(order, (std::vector<uint64_t>{big, big + 1, first, first + 1, first + 2, first + 3, big + 2, big + 3,
                                          big + 4, big + 5, big + 6, big + 7}));
  caf::anon_send_exit(fusion, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  sched.run();
}

// ---- two ranks, random interleaving ----

/// The fake data plane of both ranks: a chunk ends (chunk_ran to the sender that started it,
/// on each rank) once both ranks started it, after a random delay chosen by the test.
struct wire {
  std::map<uint64_t, std::map<int, caf::actor>> started;  // sequence → rank → its sender
  std::vector<std::pair<caf::actor, uint64_t>> ready;     // chunk_ran to deliver
  std::map<int, std::vector<uint64_t>> start_order;       // by rank
};

struct rank_runner final : chunk_runner {
  int rank;
  std::shared_ptr<wire> w;
  std::vector<caf::actor>* senders;
  rank_runner(int r, std::shared_ptr<wire> wr, std::vector<caf::actor>* s) : rank(r), w(std::move(wr)), senders(s) {}
  void run(const chunk_work& c, int stream) override {
    auto& by_rank = w->started[c.sequence];
    EXPECT_TRUE(by_rank.emplace(rank, (*senders)[static_cast<std::size_t>(stream)]).second)
        << "rank " << rank << " started " << c.sequence << " twice";
    w->start_order[rank].push_back(c.sequence);
    if (by_rank.size() == 2)
      for (auto& [r, sender] : by_rank) w->ready.emplace_back(sender, c.sequence);
  }
};

/// Completion's stand-in: counts ended chunks and tells fusion (chunk_ended), as completion does.
struct ends_state {
  caf::actor fusion;
  std::set<uint64_t> ended;
};
caf::behavior ends_actor(caf::stateful_actor<ends_state>* self) {
  return {[=](const caf::actor& fusion) { self->state.fusion = fusion; },
          [=](const chunk_done& d) {
            EXPECT_TRUE(d.result.ok());
            EXPECT_TRUE(self->state.ended.insert(d.sequence).second);
            self->send(self->state.fusion, chunk_ended{d.sequence});
          },
          [=](const bucket_planned&) {}};
}

TEST(priority_two_ranks, random_arrival_and_ends_run_every_chunk_on_both_ranks) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    caf::actor_system_config cfg;
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    caf::actor_system sys{cfg};
    auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
    auto w = std::make_shared<wire>();
    tensors t;
    std::vector<batch_agreed> batches;
    // A big low-priority bucket, then smaller ones of mixed priority, some fused.
    batches.push_back({1, {t.op("big", 1u << 20, 0)}});
    batches.push_back({2, {t.op("a", 64u << 10, 3), t.op("b", 8u << 10, 7), t.op("c", 300u << 10, 7)}});
    batches.push_back({3, {t.op("d", 512u << 10, 9)}});
    batches.push_back({4, {t.op("e", 128u << 10, 1), t.op("f", 4u << 10, 12)}});
    batches.push_back({5, {t.op("g", 256u << 10, 9)}});
    std::vector<caf::actor> fusions(2), ends(2);
    std::vector<std::vector<caf::actor>> senders(2);
    for (int r = 0; r < 2; ++r) {
      auto fc = small_config();
      fc.rank = r;
      fc.start_window = 1 + rng() % 4;  // ranks may differ: the order may not depend on it
      fusions[r] = sys.spawn(fusion_actor, fc);
      ends[r] = sys.spawn<test::class_actor<ends_state, ends_actor>>();
      caf::anon_send(ends[r], fusions[r]);
      auto runner = std::make_shared<rank_runner>(r, w, &senders[r]);
      for (int s = 0; s < 2; ++s) {
        sender_config c;
        c.stream = s;
        c.runner = runner;
        c.max_in_flight = 1;
        senders[r].push_back(sys.spawn(sender_actor, c));
      }
      for (auto& s : senders[r]) caf::anon_send(s, sender_wiring{ends[r], senders[r], nullptr, nullptr});
      caf::anon_send(fusions[r], fusion_wiring{ends[r], senders[r], nullptr, nullptr});
    }
    sched.run();
    std::vector<std::size_t> next(2, 0);
    std::size_t total = 0;
    for (int guard = 0; guard < 100000; ++guard) {
      const auto choice = rng() % 4;
      if (choice == 0) {  // a batch reaches one rank
        int r = static_cast<int>(rng() % 2);
        if (next[r] < batches.size()) caf::anon_send(fusions[r], batches[next[r]++]);
      } else if (choice == 1 && !w->ready.empty()) {  // the wire ends one chunk on one rank
        auto at = w->ready.begin() + static_cast<std::ptrdiff_t>(rng() % w->ready.size());
        caf::anon_send(at->first, chunk_ran{at->second, {}});
        w->ready.erase(at);
      } else {
        sched.try_run_once();
      }
      const bool all_sent = next[0] == batches.size() && next[1] == batches.size();
      if (all_sent && w->ready.empty() && !sched.has_job()) {
        total = state_of<ends_state>(ends[0]).ended.size();
        break;
      }
    }
    // Chunks of 64 KiB: big 16; b+a fused 2, c in place 5; d 8; f+e fused 3; g 4.
    EXPECT_EQ(total, 38u) << "the ranks went quiet with chunks left (a deadlock)";
    EXPECT_EQ(state_of<ends_state>(ends[0]).ended, state_of<ends_state>(ends[1]).ended);
    EXPECT_EQ(w->started.size(), total);
    for (auto& [seq, by_rank] : w->started) EXPECT_EQ(by_rank.size(), 2u) << "sequence " << seq;
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(state_of<fusion_state>(fusions[r]).waiting.empty());
      EXPECT_TRUE(state_of<fusion_state>(fusions[r]).handed.empty());
    }
    for (int r = 0; r < 2; ++r) {
      caf::anon_send_exit(fusions[r], caf::exit_reason::user_shutdown);
      caf::anon_send_exit(ends[r], caf::exit_reason::user_shutdown);
      for (auto& s : senders[r]) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    }
    sched.run();
  }
}

}  // namespace
}  // namespace chorus
