// Sender actors with a fake data plane that holds chunks until the test ends them, driven by
// CAF's test coordinator. One slowed sender's queued chunks move to the idle ones (taken from
// the tail), every chunk starts exactly once, and the start rule of sender_actor.hpp holds:
// a sender with no free slot starts only a chunk older than everything it has in flight.
#include "actors/sender_actor.hpp"
#include "tests/actors/class_actor.hpp"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <map>
#include <set>

namespace chorus {
namespace {

template <class State>
State& state_of(const caf::actor& a) {
  return dynamic_cast<caf::stateful_actor<State>&>(*caf::actor_cast<caf::abstract_actor*>(a)).state;
}

/// Records every start; chunks end only when the test says so.
struct holding_runner final : chunk_runner {
  struct start_event {
    uint64_t sequence;
    int stream;
    std::set<uint64_t> in_flight;  ///< on that stream, just before the start
  };
  std::vector<start_event> starts;
  std::map<int, std::set<uint64_t>> running;
  void run(const chunk_work& w, int stream) override {
    starts.push_back({w.sequence, stream, running[stream]});
    running[stream].insert(w.sequence);
  }
};

struct done_sink_state {
  std::vector<chunk_done> done;
};
caf::behavior done_sink(caf::stateful_actor<done_sink_state>* self) {
  return {[=](const chunk_done& d) { self->state.done.push_back(d); }};
}

struct senders_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<holding_runner> runner = std::make_shared<holding_runner>();
  std::vector<caf::actor> senders;
  caf::actor sink;
  std::shared_ptr<bucket_job> job = std::make_shared<bucket_job>();

  explicit senders_fixture(int streams) {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    sink = sys->spawn<::chorus::test::class_actor<done_sink_state, done_sink>>();
    for (int s = 0; s < streams; ++s) {
      sender_config c;
      c.stream = s;
      c.runner = runner;
      c.record_starts = true;
      senders.push_back(sys->spawn(sender_actor, c));
    }
    for (auto& s : senders) caf::anon_send(s, sender_wiring{sink, senders, nullptr, nullptr});
    sched->run();
  }
  ~senders_fixture() {
    for (auto& s : senders) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    sched->run();
  }
  void give(int stream, uint64_t seq, chunk_algo algo = chunk_algo::ring_allreduce) {
    chunk_work w;
    w.sequence = seq;
    w.algo = algo;
    w.bytes = 1024;
    w.job = job;
    caf::anon_send(senders[stream], w);
  }
  void end(int stream, uint64_t seq, status st = {}) {
    ASSERT_EQ(runner->running[stream].erase(seq), 1u) << "sequence " << seq << " is not running on stream " << stream;
    caf::anon_send(senders[stream], chunk_ran{seq, std::move(st)});
  }
  /// Ends, one at a time, everything running on streams other than `held`, until quiet.
  void run_all_but(int held) {
    for (int guard = 0; guard < 10000; ++guard) {
      sched->run();
      bool ended = false;
      for (auto& [stream, seqs] : runner->running) {
        if (stream == held || seqs.empty()) continue;
        end(stream, *seqs.begin());
        ended = true;
        break;
      }
      if (!ended) return;
    }
    FAIL() << "senders never went quiet";
  }
  sender_state& sender(int s) { return state_of<sender_state>(senders[s]); }
  std::vector<chunk_done>& done() { return state_of<done_sink_state>(sink).done; }
};

/// Rule (2) of sender_actor.hpp at every start, and at rest: a queued chunk waits only when the
/// sender has no free slot and an older chunk in flight.
void expect_start_rule(senders_fixture& f) {
  for (const auto& e : f.runner->starts) {
    bool slot = e.in_flight.size() < 2;
    bool oldest = e.in_flight.empty() || e.sequence < *e.in_flight.begin();
    EXPECT_TRUE(slot || oldest) << "stream " << e.stream << " started " << e.sequence << " with "
                                << e.in_flight.size() << " older-first in flight";
  }
  for (std::size_t s = 0; s < f.senders.size(); ++s) {
    auto& st = f.sender(static_cast<int>(s));
    EXPECT_TRUE(std::is_sorted(st.queue.begin(), st.queue.end(),
                               [](const chunk_work& a, const chunk_work& b) { return a.sequence < b.sequence; }));
    if (!st.queue.empty()) {
      EXPECT_GE(st.in_flight.size(), 2u);
      EXPECT_GT(st.queue.front().sequence, st.in_flight.begin()->first);
    }
  }
}

TEST(sender_actor, a_slowed_sender_loses_its_queued_chunks_to_idle_ones) {
  senders_fixture f(3);
  const int chunks = 12;
  for (int q = 0; q < chunks; ++q) f.give(q % 3, static_cast<uint64_t>(q));  // as fusion does
  f.run_all_but(0);                                                          // stream 0 is held
  expect_start_rule(f);

  // Stream 0 started its first two chunks and kept nothing queued: the others took the rest.
  EXPECT_EQ(f.runner->running[0], (std::set<uint64_t>{0, 3}));
  EXPECT_TRUE(f.sender(0).queue.empty());
  EXPECT_EQ(f.sender(0).stats.given, 2u);
  uint64_t stolen = 0, given = 0;
  for (int s = 0; s < 3; ++s) stolen += f.sender(s).stats.stolen, given += f.sender(s).stats.given;
  EXPECT_EQ(stolen, given);  // streams 1 and 2 may also take from each other
  EXPECT_EQ(f.sender(0).stats.stolen, 0u);
  std::multiset<uint64_t> started;
  for (auto& e : f.runner->starts) started.insert(e.sequence);
  EXPECT_EQ(started.size(), static_cast<std::size_t>(chunks));
  for (int q = 0; q < chunks; ++q) EXPECT_EQ(started.count(static_cast<uint64_t>(q)), 1u) << q;
  // The stolen chunks were stream 0's tail (9, then 6), never its head.
  std::set<uint64_t> moved;
  for (auto& e : f.runner->starts)
    if (e.sequence % 3 == 0 && e.stream != 0) moved.insert(e.sequence);
  EXPECT_EQ(moved, (std::set<uint64_t>{6, 9}));

  // Release stream 0: every chunk ends exactly once.
  f.end(0, 0);
  f.end(0, 3);
  f.run_all_but(-1);
  std::multiset<uint64_t> ended;
  for (auto& d : f.done()) ended.insert(d.sequence);
  for (int q = 0; q < chunks; ++q) EXPECT_EQ(ended.count(static_cast<uint64_t>(q)), 1u) << q;
  uint64_t bytes = 0;
  for (int s = 0; s < 3; ++s) bytes += f.sender(s).stats.bytes;
  EXPECT_EQ(bytes, uint64_t{1024} * chunks);
}

TEST(sender_actor, an_older_chunk_starts_even_when_all_slots_are_taken) {
  senders_fixture f(1);
  f.give(0, 5);
  f.give(0, 6);
  f.give(0, 7);  // waits: two in flight, both older
  f.sched->run();
  EXPECT_EQ(f.runner->running[0], (std::set<uint64_t>{5, 6}));
  f.give(0, 2);  // older than everything in flight (e.g. stolen): starts at once
  f.sched->run();
  EXPECT_EQ(f.runner->running[0], (std::set<uint64_t>{2, 5, 6}));
  ASSERT_EQ(f.sender(0).queue.size(), 1u);
  EXPECT_EQ(f.sender(0).queue.front().sequence, 7u);
  expect_start_rule(f);
  f.end(0, 5);  // still two in flight: 7 waits
  f.sched->run();
  EXPECT_EQ(f.runner->running[0], (std::set<uint64_t>{2, 6}));
  f.end(0, 2);
  f.sched->run();
  EXPECT_EQ(f.runner->running[0], (std::set<uint64_t>{6, 7}));
  EXPECT_EQ(f.sender(0).stats.max_in_flight, 3u);
}

TEST(sender_actor, errors_are_passed_on_with_the_chunk) {
  senders_fixture f(2);
  f.give(0, 0);
  f.give(1, 1);
  f.sched->run();
  f.end(0, 0, status{errc::connection_lost, "rank 1 closed the connection"});
  f.end(1, 1);
  f.sched->run();
  ASSERT_EQ(f.done().size(), 2u);
  for (auto& d : f.done()) {
    if (d.sequence == 0) EXPECT_EQ(d.result.code(), errc::connection_lost);
    if (d.sequence == 1) EXPECT_TRUE(d.result.ok());
  }
}

TEST(sender_actor, idle_senders_with_nothing_to_steal_go_quiet) {
  senders_fixture f(4);
  f.give(2, 0);
  f.run_all_but(-1);
  EXPECT_EQ(f.done().size(), 1u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_FALSE(f.sender(s).stealing) << s;
    EXPECT_EQ(f.sender(s).stats.stolen, 0u);
  }
  EXPECT_FALSE(f.sched->has_job());
}

TEST(sender_actor, an_isolated_chunk_ends_without_a_steal_round) {
  // Nothing queued in any deque (chunk_runner::queued_anywhere is 0): the sender whose chunk
  // ended asks no sibling for work.
  senders_fixture f(3);
  f.give(1, 0);
  f.sched->run();
  EXPECT_EQ(f.runner->queued_anywhere().load(), 0u);
  f.end(1, 0);
  f.sched->run();
  ASSERT_EQ(f.done().size(), 1u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(f.sender(s).round, 0u) << "stream " << s << " started a steal round";
    EXPECT_FALSE(f.sender(s).stealing) << s;
  }
  EXPECT_FALSE(f.sched->has_job());
}

TEST(sender_actor, the_queued_count_follows_every_deque) {
  senders_fixture f(2);
  for (uint64_t q = 0; q < 6; ++q) f.give(0, q);  // stream 0: 2 in flight, 4 queued
  f.sched->run();
  EXPECT_EQ(f.runner->queued_anywhere().load(), 4u);
  f.run_all_but(0);  // stream 1 has nothing; it may steal from stream 0 once a chunk ends there
  EXPECT_EQ(f.runner->queued_anywhere().load(), f.sender(0).queue.size() + f.sender(1).queue.size());
  f.run_all_but(-1);
  EXPECT_EQ(f.done().size(), 6u);
  EXPECT_EQ(f.runner->queued_anywhere().load(), 0u);
  EXPECT_FALSE(f.sched->has_job());
}

TEST(sender_actor, direct_chunks_take_no_slot_and_are_never_stolen) {
  senders_fixture f(2);
  const auto direct = chunk_algo::mailbox_allreduce;
  f.give(0, 0);
  f.give(0, 1);          // both slots
  f.give(0, 2);          // waits for a slot
  f.give(0, 3, direct);  // behind 2, so it waits too
  f.give(0, 4, direct);
  f.sched->run();
  EXPECT_EQ(f.runner->running[0], (std::set<uint64_t>{0, 1}));
  EXPECT_EQ(f.runner->queued_anywhere().load(), 1u);  // only 2 can be stolen
  // Stream 1 runs out of work: it steals 2 (the newest chunk but the direct ones), and 3 and 4
  // then head stream 0's deque and start there without a slot.
  f.give(1, 5);
  f.sched->run();
  f.end(1, 5);
  f.sched->run();
  EXPECT_EQ(f.runner->running[1], (std::set<uint64_t>{2}));
  EXPECT_EQ(f.runner->running[0], (std::set<uint64_t>{0, 1, 3, 4}));
  EXPECT_EQ(f.sender(0).direct_in_flight, 2u);
  EXPECT_TRUE(f.sender(0).queue.empty());
  EXPECT_EQ(f.sender(0).stats.given, 1u);
  EXPECT_EQ(f.runner->queued_anywhere().load(), 0u);
  // A new chunk on stream 0 finds its two slots taken by 0 and 1, not by the direct ones.
  f.give(0, 6);
  f.sched->run();
  EXPECT_EQ(f.runner->running[0].count(6), 0u);
  f.end(0, 3);
  f.end(0, 4);
  f.sched->run();
  EXPECT_EQ(f.sender(0).direct_in_flight, 0u);
  EXPECT_EQ(f.runner->running[0].count(6), 0u);  // still two non-direct chunks in flight
  f.end(0, 0);
  f.sched->run();
  EXPECT_EQ(f.runner->running[0].count(6), 1u);
  f.run_all_but(-1);
  EXPECT_EQ(f.done().size(), 7u);
  EXPECT_FALSE(f.sched->has_job());
}

}  // namespace
}  // namespace chorus
