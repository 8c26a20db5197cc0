// Placement by observed rate (runtime/collectives/stream_placement.hpp and stream_board.hpp):
// the chunk goes to the stream expected to finish it first; a slow stream gets proportionally
// less; an idle stream's stale estimate is raised until it is probed, and probed less often
// while it stays slow; the board moves bytes on
// steals and learns rates from finished chunks. Pure functions and a hand-driven clock.
#include "runtime/collectives/stream_board.hpp"
#include "runtime/collectives/stream_placement.hpp"

#include <gtest/gtest.h>

#include <map>

namespace chorus {
namespace {

using namespace std::chrono_literals;

TEST(stream_placement, equal_streams_fill_round_robin_like) {
  std::vector<stream_view> s(4, stream_view{100.0, 0, 0});
  std::vector<std::size_t> picks;
  for (int i = 0; i < 8; ++i) {
    auto to = pick_stream(s, 10);
    s[to].outstanding += 10;
    picks.push_back(to);
  }
  EXPECT_EQ(picks, (std::vector<std::size_t>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(stream_placement, earliest_expected_finish_wins) {
  // Stream 0 is four times faster but already holds 50 bytes: (50+10)/400 = 0.15 s against
  // stream 1's (0+10)/100 = 0.1 s.
  std::vector<stream_view> s{{400.0, 50, 0}, {100.0, 0, 0}};
  EXPECT_EQ(pick_stream(s, 10), 1u);
  s[0].outstanding = 20;  // (20+10)/400 = 0.075 s: now stream 0 is first
  EXPECT_EQ(pick_stream(s, 10), 0u);
}

TEST(stream_placement, a_slow_stream_gets_work_in_proportion_to_its_rate) {
  // Three streams at 120, one at 30 (a 250 Mbit/s flow among 1 Gbit/s ones): 26 chunks of one
  // operation, placed up front, spread so that all streams finish about together.
  std::vector<stream_view> s{{120.0, 0, 0}, {120.0, 0, 0}, {30.0, 0, 0}, {120.0, 0, 0}};
  std::map<std::size_t, int> count;
  for (int i = 0; i < 26; ++i) {
    auto to = pick_stream(s, 1);
    s[to].outstanding += 1;
    ++count[to];
  }
  EXPECT_EQ(count[2], 2);
  EXPECT_EQ(count[0] + count[1] + count[3], 24);
  for (std::size_t f : {0u, 1u, 3u}) EXPECT_EQ(count[f], 8);
}

TEST(stream_placement, blend_moves_toward_the_sample_by_its_weight) {
  EXPECT_DOUBLE_EQ(blend_rate(100.0, 200.0, 0.5), 150.0);
  EXPECT_DOUBLE_EQ(blend_rate(100.0, 20.0, 1.0), 20.0);
  EXPECT_DOUBLE_EQ(blend_rate(100.0, 100.0, 0.3), 100.0);
}

TEST(stream_placement, an_idle_slow_stream_is_raised_until_probed) {
  std::vector<stream_view> s{{100.0, 0, 0}, {1.0, 0, 0}};
  s[1].passed_over = 31;
  EXPECT_EQ(age_idle_streams(s, 32), 0u);
  EXPECT_DOUBLE_EQ(s[1].rate, 1.0);
  s[1].passed_over = 32;
  EXPECT_EQ(age_idle_streams(s, 32), 1u);
  EXPECT_DOUBLE_EQ(s[1].rate, 25.0);  // at least a quarter of the fastest
  EXPECT_EQ(s[1].passed_over, 0u);
  s[1].passed_over = 32;
  age_idle_streams(s, 32);
  EXPECT_DOUBLE_EQ(s[1].rate, 50.0);  // then doubled
  // A stream that holds work is being measured: never raised.
  s[1].passed_over = 40;
  s[1].outstanding = 5;
  EXPECT_EQ(age_idle_streams(s, 32), 0u);
  // Raised at most to the fastest stream's rate.
  s[1] = {90.0, 0, 32};
  age_idle_streams(s, 32);
  EXPECT_DOUBLE_EQ(s[1].rate, 100.0);
}

// A probe's guess is replaced by what the probe measured; a probe that finds the stream still
// slow doubles its wait before the next probe (up to the cap), and a fast sample clears it.
TEST(stream_placement, a_probe_that_finds_the_stream_slow_backs_off) {
  std::vector<stream_view> s{{100.0, 0, 0}, {10.0, 0, 0}};
  auto probe = [&](uint32_t after) {
    s[1].passed_over = after;
    return age_idle_streams(s, 4);
  };
  EXPECT_EQ(probe(4), 1u);
  EXPECT_TRUE(s[1].guessed);
  EXPECT_DOUBLE_EQ(s[1].rate, 25.0);
  measured_rate(s, 1, 12.0, 0.5, 3);
  EXPECT_DOUBLE_EQ(s[1].rate, 12.0);  // the guess is not blended in
  EXPECT_FALSE(s[1].guessed);
  EXPECT_EQ(s[1].backoff, 1u);
  EXPECT_EQ(probe(7), 0u);  // now waits 4 << 1 placements
  EXPECT_EQ(probe(8), 1u);
  measured_rate(s, 1, 12.0, 0.5, 3);
  EXPECT_EQ(s[1].backoff, 2u);
  for (int i = 0; i < 3; ++i) {
    probe(1000);
    measured_rate(s, 1, 12.0, 0.5, 3);
  }
  EXPECT_EQ(s[1].backoff, 3u);  // capped
  EXPECT_EQ(probe(4 * 8 - 1), 0u);
  // A sample that is not a probe's blends in and leaves the backoff alone while slow...
  measured_rate(s, 1, 20.0, 0.5, 3);
  EXPECT_DOUBLE_EQ(s[1].rate, 16.0);
  EXPECT_EQ(s[1].backoff, 3u);
  // ...and a stream that recovered (at least half the fastest other's rate) is probed as often
  // as any.
  EXPECT_EQ(probe(4 * 8), 1u);
  measured_rate(s, 1, 60.0, 0.5, 3);
  EXPECT_EQ(s[1].backoff, 0u);
  EXPECT_DOUBLE_EQ(s[1].rate, 60.0);
  EXPECT_EQ(probe(4), 1u);
}

TEST(stream_board, places_counts_and_moves_outstanding_bytes) {
  stream_board b(2, stream_board::options{});
  EXPECT_EQ(b.place(10), 0);
  EXPECT_EQ(b.place(10), 1);
  EXPECT_EQ(b.place(10), 0);
  auto v = b.snapshot();
  EXPECT_EQ(v[0].outstanding, 20u);
  EXPECT_EQ(v[1].outstanding, 10u);
  b.moved_chunk(0, 1, 10);  // stream 1 stole one of stream 0's chunks
  v = b.snapshot();
  EXPECT_EQ(v[0].outstanding, 10u);
  EXPECT_EQ(v[1].outstanding, 20u);
}

TEST(stream_board, learns_rates_from_finished_chunks_and_places_by_them) {
  // Moved bytes from a fake transport counter, a hand-driven clock.
  std::vector<uint64_t> moved{0, 0};
  stream_board::options o;
  o.weight = 1.0;  // the latest sample is the estimate
  o.min_sample_bytes = 1;
  stream_board b(2, o, [&](int s) { return stream_board::reading{moved[static_cast<std::size_t>(s)], 0, 0}; });
  auto t0 = stream_board::clock::time_point{} + 1s;
  b.place(1000);
  b.place(1000);
  b.started(0, t0);
  b.started(1, t0);
  moved[0] = 1000;
  b.finished(0, 1000, t0 + 10ms);  // 100 kB/s
  moved[1] = 1000;
  b.finished(1, 1000, t0 + 40ms);  // 25 kB/s
  auto v = b.snapshot();
  EXPECT_NEAR(v[0].rate, 100000.0, 1.0);
  EXPECT_NEAR(v[1].rate, 25000.0, 1.0);
  // Five chunks of 1000: the fast stream takes four, the slow one one.
  std::map<int, int> count;
  for (int i = 0; i < 5; ++i) ++count[b.place(1000)];
  EXPECT_EQ(count[0], 4);
  EXPECT_EQ(count[1], 1);
}

TEST(stream_board, a_stream_that_slows_gets_less_and_recovers) {
  std::vector<uint64_t> moved{0, 0};
  stream_board::options o;
  o.weight = 0.5;
  o.min_sample_bytes = 1;
  stream_board b(2, o, [&](int s) { return stream_board::reading{moved[static_cast<std::size_t>(s)], 0, 0}; });
  auto now = stream_board::clock::time_point{} + 1s;
  // One operation: a chunk of 1000 on each stream; stream 1 takes `slow_ms`.
  auto op = [&](int slow_ms) {
    for (int s : {0, 1}) {
      b.started(s, now);
      moved[static_cast<std::size_t>(s)] += 1000;
    }
    b.finished(0, 0, now + 10ms);
    b.finished(1, 0, now + std::chrono::milliseconds(slow_ms));
    now += 100ms;
  };
  auto share_of_1 = [&] {
    auto v = b.snapshot();
    for (auto& x : v) x.outstanding = 0;
    int ones = 0;
    for (int i = 0; i < 10; ++i) {
      auto to = pick_stream(v, 1000);
      v[to].outstanding += 1000;
      ones += to == 1;
    }
    return ones;
  };
  op(10);
  EXPECT_EQ(share_of_1(), 5);
  for (int i = 0; i < 3; ++i) op(80);  // stream 1 slows down: within three operations
  EXPECT_LE(share_of_1(), 2);
  for (int i = 0; i < 4; ++i) op(10);  // and recovers
  EXPECT_GE(share_of_1(), 4);
}

TEST(stream_board, small_chunks_that_wait_on_latency_do_not_make_a_stream_look_slow) {
  // An 8-byte allreduce that waits 50 ms for a peer moved 8 bytes in 50 ms: no sample. Its span
  // is dropped when the stream goes idle; a large chunk later measures the stream.
  std::vector<uint64_t> moved{0};
  stream_board b(1, stream_board::options{}, [&](int) { return stream_board::reading{moved[0], 0, 0}; });
  auto t0 = stream_board::clock::time_point{} + 1s;
  b.started(0, t0);
  moved[0] += 8;
  b.finished(0, 8, t0 + 50ms);
  EXPECT_DOUBLE_EQ(b.snapshot()[0].rate, stream_board::options{}.seed_rate);
  b.started(0, t0 + 100ms);
  moved[0] += 4u << 20;
  b.finished(0, 4u << 20, t0 + 140ms);  // 4 MiB in 40 ms
  EXPECT_NEAR(b.snapshot()[0].rate, (4u << 20) / 0.04, 1e3);
}

TEST(stream_board, over_tcp_the_kernels_busy_time_measures_a_stream_that_also_waited) {
  // A chunk spent 100 ms on the stream but the connection was busy sending for only 20 ms of
  // them (the rest it waited on a peer): 2 MiB in 20 ms of busy time, not in 100 ms.
  stream_board::reading r{0, 1, 0};
  stream_board b(1, stream_board::options{}, [&](int) { return r; });
  auto t0 = stream_board::clock::time_point{} + 1s;
  b.started(0, t0);
  r = {2u << 20, 1 + (2u << 20), 20000};
  b.finished(0, 2u << 20, t0 + 100ms);
  EXPECT_NEAR(b.snapshot()[0].rate, (2u << 20) / 0.02, 1e3);
}

}  // namespace
}  // namespace chorus
