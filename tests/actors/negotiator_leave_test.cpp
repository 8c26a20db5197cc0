// A clean leave (actors/departures.hpp): a rank that finished a negotiation cycle and shut down
// at once must not take that cycle's agreement from the ranks still in it. Three negotiators on
// a modelled control link whose messages the test holds and releases, so the race the elastic
// test hit (rank 0 completes a broadcast as its root and shuts down while rank 1 still waits
// for rank 2's last gossip of the cycle) happens every time.
#include "actors/departures.hpp"
#include "tests/actors/negotiator_fixture.hpp"

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

namespace chorus {
namespace {

using namespace chorus::test;

struct frame {
  int from = 0, to = 0;
  control_kind kind = control_kind::gossip;
  int origin = -1;
  std::vector<uint8_t> data;
};

/// Three negotiators whose control messages wait on `wire` until the test delivers them.
struct held_link_job {
  std::vector<frame> wire;
  ranks_fixture f{3, "gossip", {}, [this](negotiator_config& c) {
                    c.send_control = [this, from = c.rank](int to, control_kind kind, int origin,
                                                           std::span<const uint8_t> data) {
                      wire.push_back(frame{from, to, kind, origin, {data.begin(), data.end()}});
                      return true;
                    };
                  }};

  void deliver(const frame& m) {
    auto& to = f.negotiators[static_cast<std::size_t>(m.to)];
    switch (m.kind) {
      case control_kind::gossip:
        caf::anon_send(to, gossip_bytes{m.data});
        break;
      case control_kind::gone:
        caf::anon_send(to, gone_atom::value, m.origin, std::string(m.data.begin(), m.data.end()));
        break;
      case control_kind::leaving:
        caf::anon_send(to, leaving_atom::value, m.from, *leaving_cycles(m.data));
        break;
    }
  }
  /// Delivers every frame `hold` lets through (and what they cause), to a departed rank none;
  /// with `timers`, also fires the cycle timers until nothing moves.
  template <class Hold>
  void pump(Hold hold, bool timers, const std::vector<int>& departed = {}) {
    for (int i = 0; i < 10000; ++i) {
      f.sched->run();
      std::vector<frame> now, keep;
      for (auto& m : wire) {
        bool gone = std::find(departed.begin(), departed.end(), m.to) != departed.end();
        if (gone) continue;  // its connection is closed: dropped
        (hold(m) ? keep : now).push_back(m);
      }
      wire = std::move(keep);
      for (auto& m : now) deliver(m);
      if (!now.empty()) continue;
      if (!timers || !f.sched->trigger_timeout()) return;
    }
    FAIL() << "the negotiators never went quiet";
  }
  /// Rank `r` shuts down: its leaving notices go out, then its goodbye reaches the others.
  void leave(int r) {
    caf::anon_send(f.negotiators[static_cast<std::size_t>(r)], stop_atom::value);
    pump([r](const frame& m) { return m.from != r; }, false);
    for (int p = 0; p < f.size(); ++p)
      if (p != r)
        caf::anon_send(f.negotiators[static_cast<std::size_t>(p)], left_atom::value, r,
                       "rank " + std::to_string(r) + " left the job (it shut down)");
    f.sched->run();
  }
};

bool from_2_to_1(const frame& m) { return m.from == 2 && m.to == 1; }

TEST(negotiator_leave, a_rank_that_finished_the_cycle_and_left_does_not_fail_it_for_the_others) {
  held_link_job job;
  for (int r = 0; r < 3; ++r) job.f.ready(r, spec("w", {8}));
  job.pump(from_2_to_1, true);
  ASSERT_EQ(job.f.batches(0), (std::vector<std::vector<std::string>>{{"w"}}));
  ASSERT_EQ(job.f.batches(2), job.f.batches(0));
  ASSERT_TRUE(job.f.batches(1).empty()) << "rank 1 still waits for rank 2's round-1 gossip";

  job.leave(0);
  EXPECT_TRUE(job.f.sink(1).finished.empty()) << "the goodbye must not end 'w' on rank 1: "
                                               << job.f.sink(1).finished.front().result.message();
  job.pump([](const frame&) { return false; }, false, {0});  // rank 2's gossip arrives
  EXPECT_EQ(job.f.batches(1), (std::vector<std::vector<std::string>>{{"w"}})) << "rank 1 agrees with the others";
  EXPECT_TRUE(job.f.sink(1).finished.empty());

  // Nothing later can be agreed without rank 0: a new op ends at once, naming it.
  for (int r = 1; r < 3; ++r) job.f.ready(r, spec("x", {8}));
  job.pump([](const frame&) { return false; }, true, {0});
  for (int r = 1; r < 3; ++r) {
    ASSERT_EQ(job.f.sink(r).finished.size(), 1u) << "rank " << r;
    const auto& e = job.f.sink(r).finished.front().result;
    EXPECT_EQ(e.code(), errc::connection_lost) << e.message();
    EXPECT_NE(e.message().find("allreduce('x')"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("rank 0 left the job"), std::string::npos) << e.message();
  }
}

TEST(negotiator_leave, a_leaver_that_never_had_the_tensor_fails_it_at_its_goodbye) {
  held_link_job job;
  for (int r = 1; r < 3; ++r) job.f.ready(r, spec("w", {8}));  // rank 0 never has 'w'
  job.pump([](const frame&) { return false; }, true);
  job.leave(0);
  for (int r = 1; r < 3; ++r) {
    ASSERT_EQ(job.f.sink(r).finished.size(), 1u) << "rank " << r << " must not wait for rank 0";
    EXPECT_NE(job.f.sink(r).finished.front().result.message().find("rank 0 left the job"), std::string::npos);
  }
}

TEST(negotiator_leave, cycles_a_leaver_finished_run_until_done_then_the_earliest_leave_ends_negotiation) {
  departures d;
  status gone0{errc::connection_lost, "rank 0 left"}, gone2{errc::connection_lost, "rank 2 left"};
  EXPECT_FALSE(d.left(1, gone0, 4)) << "no notice: end now";
  d.announced(0, 7);
  d.announced(2, 5);
  EXPECT_FALSE(d.left(0, gone0, 7)) << "this rank already finished cycle 7";
  EXPECT_TRUE(d.left(0, gone0, 6));
  EXPECT_FALSE(d.due(6).has_value());
  EXPECT_TRUE(d.left(2, gone2, 4));
  EXPECT_EQ(d.until(), 5u) << "the earlier leave bounds what can still be agreed";
  EXPECT_FALSE(d.due(4).has_value());
  ASSERT_TRUE(d.due(5).has_value());
  EXPECT_EQ(d.due(5)->message(), "rank 2 left");
}

TEST(negotiator_leave, a_leaving_notice_carries_the_cycle_count_and_refuses_a_malformed_one) {
  EXPECT_EQ(leaving_cycles(leaving_data(0x0102030405060708ull)), 0x0102030405060708ull);
  EXPECT_FALSE(leaving_cycles({1, 2, 3}).has_value());
  EXPECT_FALSE(leaving_cycles(std::vector<uint8_t>(9, 0)).has_value());
}

}  // namespace
}  // namespace chorus
