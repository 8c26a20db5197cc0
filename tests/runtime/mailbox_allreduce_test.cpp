// The calling thread's small allreduce (runtime/collectives/mailbox_allreduce.hpp), ranks in
// threads of one process joined by real shared-memory mailboxes: every rank ends with the same
// exact result for each dtype and op; a rank waiting for a peer that never posts returns the
// status interrupt() gives it (and so does every later call); ranks whose calls differ both
// get a protocol error saying what each posted; buffers larger than a slot go in pieces and stay
// exact, and so do buffers in regions cut differently on each rank; what it takes and what it
// leaves alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/collectives/mailbox_allreduce.hpp"
#include "tests/runtime/mailbox_ranks.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

// Element i of rank r's buffer in iteration `it`: small integers, exact in every dtype.
double value(int r, std::size_t i, int it) { return static_cast<double>((r * 3 + static_cast<int>(i % 5) + it) % 7); }

template <class T>
std::vector<std::byte> buffer_of(int r, std::size_t count, int it) {
  std::vector<std::byte> b(count * sizeof(T));
  for (std::size_t i = 0; i < count; ++i) {
    T v = static_cast<T>(value(r, i, it));
    std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
  }
  return b;
}

template <class T>
void check_sums_and_maxima(int n, dtype t) {
  auto ranks = make_ranks(n);
  for (int it = 0; it < 200; ++it) {
    const std::size_t count = it % 3 == 0 ? 0 : (it % 2 ? 1024 : (64u << 10) / sizeof(T));
    const reduce_op op = it % 2 ? reduce_op::sum : reduce_op::max;
    std::vector<std::vector<std::byte>> bufs;
    for (int r = 0; r < n; ++r) bufs.push_back(buffer_of<T>(r, count, it));
    std::vector<std::future<status>> runs;
    for (int r = 0; r < n; ++r)
      runs.push_back(std::async(std::launch::async, [&, r] { return ranks[r]->run(bufs[r].data(), count, t, op); }));
    for (int r = 0; r < n; ++r) {
      auto st = runs[r].get();
      ASSERT_TRUE(st.ok()) << "rank " << r << " iteration " << it << ": " << st.to_string();
    }
    for (std::size_t i = 0; i < count; ++i) {
      double want = op == reduce_op::sum ? 0 : value(0, i, it);
      for (int r = 0; r < n; ++r) want = op == reduce_op::sum ? want + value(r, i, it) : std::max(want, value(r, i, it));
      T got;
      std::memcpy(&got, bufs[0].data() + i * sizeof(T), sizeof(T));
      ASSERT_EQ(static_cast<double>(got), want) << "iteration " << it << " element " << i;
    }
    for (int r = 1; r < n; ++r) ASSERT_EQ(bufs[r], bufs[0]) << "rank " << r << " differs, iteration " << it;
  }
  EXPECT_EQ(ranks[0]->posts(), 200u);
}

TEST(mailbox_allreduce, two_ranks_get_exact_identical_results) {
  check_sums_and_maxima<float>(2, dtype::f32);
  check_sums_and_maxima<double>(2, dtype::f64);
  check_sums_and_maxima<int32_t>(2, dtype::i32);
}

TEST(mailbox_allreduce, three_and_four_ranks_fold_in_rank_order_to_identical_results) {
  check_sums_and_maxima<float>(3, dtype::f32);
  check_sums_and_maxima<int64_t>(4, dtype::i64);
}

TEST(mailbox_allreduce, average_divides_once_by_the_number_of_ranks) {
  auto ranks = make_ranks(2);
  std::vector<float> a{1, 2, 3}, b{3, 4, 6};
  auto other = std::async(std::launch::async, [&] { return ranks[1]->run(b.data(), 3, dtype::f32, reduce_op::average); });
  ASSERT_TRUE(ranks[0]->run(a.data(), 3, dtype::f32, reduce_op::average).ok());
  ASSERT_TRUE(other.get().ok());
  EXPECT_EQ(a, (std::vector<float>{2, 3, 4.5f}));
  EXPECT_EQ(b, a);
}

TEST(mailbox_allreduce, a_rank_waiting_for_a_silent_peer_ends_with_the_interrupts_status) {
  // No spinning: rank 0 sleeps on the futex at once (that wake() ends such a sleep at once is
  // shm_mailbox_test's to check).
  auto ranks = make_ranks(2, 0us);
  std::vector<float> a(1024, 1.0f);
  const status why{errc::connection_lost, "rank 1 closed its connection"};
  std::thread io([&] {
    std::this_thread::sleep_for(50ms);
    ranks[0]->interrupt(why);
  });
  auto st = ranks[0]->run(a.data(), a.size(), dtype::f32, reduce_op::sum);
  io.join();
  EXPECT_EQ(st.to_string(), why.to_string());
  // Later calls fail at once with the first cause.
  ranks[0]->interrupt(status{errc::shutdown, "later"});
  EXPECT_EQ(ranks[0]->run(a.data(), a.size(), dtype::f32, reduce_op::sum).to_string(), why.to_string());
}

TEST(mailbox_allreduce, a_goodbye_ends_waits_for_that_peer_only_and_its_post_still_counts) {
  // Three ranks: rank 1 posts, then (as a rank that has every post would) leaves; rank 0 learns
  // of it before it starts, rank 2 posts late. Rank 0 must use rank 1's post and wait for rank 2.
  auto ranks = make_ranks(3);
  std::vector<std::vector<float>> bufs{{1, 2}, {10, 20}, {100, 200}};
  auto one = std::async(std::launch::async, [&] { return ranks[1]->run(bufs[1].data(), 2, dtype::f32, reduce_op::sum); });
  std::this_thread::sleep_for(30ms);  // rank 1 has posted (a later post only makes this test pass trivially)
  ranks[0]->peer_left(1, status{errc::shutdown, "rank 1 shut down"});
  auto zero = std::async(std::launch::async, [&] { return ranks[0]->run(bufs[0].data(), 2, dtype::f32, reduce_op::sum); });
  std::this_thread::sleep_for(30ms);
  auto st2 = ranks[2]->run(bufs[2].data(), 2, dtype::f32, reduce_op::sum);
  ASSERT_TRUE(st2.ok()) << st2.to_string();
  auto st0 = zero.get();
  ASSERT_TRUE(st0.ok()) << st0.to_string();
  ASSERT_TRUE(one.get().ok());
  EXPECT_EQ(bufs[0], (std::vector<float>{111, 222}));
  // The next allreduce needs rank 1's post, which never comes: it ends with the goodbye.
  EXPECT_EQ(ranks[0]->run(bufs[0].data(), 2, dtype::f32, reduce_op::sum).to_string(), "shutdown: rank 1 shut down");
}

TEST(mailbox_allreduce, ranks_whose_calls_differ_both_fail_saying_what_each_posted) {
  auto ranks = make_ranks(2);
  std::vector<float> a(10, 1.0f), b(12, 1.0f);
  auto other = std::async(std::launch::async, [&] { return ranks[1]->run(b.data(), 12, dtype::f32, reduce_op::sum); });
  auto st0 = ranks[0]->run(a.data(), 10, dtype::f32, reduce_op::sum);
  auto st1 = other.get();
  EXPECT_EQ(st0.to_string(),
            "protocol: allreduce of 40 bytes of f32 sum on rank 0, but rank 1 posted 48 bytes of f32 sum: every rank "
            "must make the same collective calls in the same order");
  EXPECT_EQ(st1.to_string(),
            "protocol: allreduce of 48 bytes of f32 sum on rank 1, but rank 0 posted 40 bytes of f32 sum: every rank "
            "must make the same collective calls in the same order");
}

TEST(mailbox_allreduce, calls_of_the_same_size_but_another_number_fail_naming_both_numbers) {
  auto ranks = make_ranks(2);
  std::vector<float> a(10, 1.0f), b(10, 1.0f);
  auto other = std::async(std::launch::async, [&] { return ranks[1]->run(b.data(), 10, dtype::f32, reduce_op::sum, 8); });
  auto st0 = ranks[0]->run(a.data(), 10, dtype::f32, reduce_op::sum, 7);
  EXPECT_EQ(st0.to_string(),
            "protocol: allreduce #7 of 40 bytes of f32 sum on rank 0, but rank 1 posted #8, 40 bytes of f32 sum: every "
            "rank must make the same collective calls in the same order");
  EXPECT_EQ(other.get().code(), errc::protocol);
}

// Several slots' worth, sizes that are no multiple of a slot (nor of a slot's elements): every
// rank gets the exact sums, all alike, through one post per piece.
template <class T>
void check_pieces(int n, dtype t) {
  auto ranks = make_ranks(n);
  const std::size_t per_post = shm::mailbox_slot_bytes / sizeof(T);
  uint64_t posts = 0;
  for (std::size_t count : {per_post + 1, 3 * per_post, 16 * per_post + 7}) {
    const int it = static_cast<int>(count % 5);
    std::vector<std::vector<std::byte>> bufs;
    for (int r = 0; r < n; ++r) bufs.push_back(buffer_of<T>(r, count, it));
    std::vector<std::future<status>> runs;
    for (int r = 0; r < n; ++r)
      runs.push_back(std::async(std::launch::async, [&, r] { return ranks[r]->run(bufs[r].data(), count, t, reduce_op::sum); }));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(runs[r].get().ok()) << "rank " << r << ", " << count << " elements";
    for (std::size_t i = 0; i < count; ++i) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += value(r, i, it);
      T got;
      std::memcpy(&got, bufs[0].data() + i * sizeof(T), sizeof(T));
      ASSERT_EQ(static_cast<double>(got), want) << count << " elements, element " << i;
    }
    for (int r = 1; r < n; ++r) ASSERT_EQ(bufs[r], bufs[0]) << "rank " << r << " differs, " << count << " elements";
    posts += (count + per_post - 1) / per_post;
  }
  EXPECT_EQ(ranks[0]->posts(), posts);
}

TEST(mailbox_allreduce, buffers_larger_than_a_slot_go_in_pieces_and_stay_exact) {
  check_pieces<float>(2, dtype::f32);
  check_pieces<double>(2, dtype::f64);
  check_pieces<int16_t>(3, dtype::i16);
  // An average over pieces divides each element once (piece by piece, after its fold).
  auto ranks = make_ranks(2);
  std::vector<float> a(100000, 1.0f), b(100000, 4.0f);
  auto other = std::async(std::launch::async, [&] { return ranks[1]->run(b.data(), b.size(), dtype::f32, reduce_op::average); });
  ASSERT_TRUE(ranks[0]->run(a.data(), a.size(), dtype::f32, reduce_op::average).ok());
  ASSERT_TRUE(other.get().ok());
  EXPECT_EQ(a, std::vector<float>(100000, 2.5f));
  EXPECT_EQ(b, a);
}

// run() over regions: each rank keeps its buffer in separate pieces of memory, cut at its own
// points (empty ones too, across slot boundaries), and ends with exactly what a contiguous
// buffer gets, average included (divided piece by piece).
template <class T>
void check_regions(int n, dtype t, reduce_op op) {
  auto ranks = make_ranks(n);
  const std::size_t count = 3 * (shm::mailbox_slot_bytes / sizeof(T)) + 5;
  std::vector<std::vector<std::byte>> whole;
  for (int r = 0; r < n; ++r) whole.push_back(buffer_of<T>(r, count, 1));
  std::vector<std::future<status>> runs;
  for (int r = 0; r < n; ++r)
    runs.push_back(std::async(std::launch::async, [&, r] { return ranks[r]->run(whole[r].data(), count, t, op); }));
  for (int r = 0; r < n; ++r) ASSERT_TRUE(runs[r].get().ok()) << "rank " << r;
  std::mt19937 rng(static_cast<unsigned>(n * 31 + static_cast<int>(op)));
  std::vector<std::vector<std::vector<std::byte>>> pieces(static_cast<std::size_t>(n));
  std::vector<std::vector<std::span<std::byte>>> regions(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto fresh = buffer_of<T>(r, count, 1);
    std::size_t at = 0;
    while (at < count) {
      const std::size_t len = std::min(count - at, static_cast<std::size_t>(rng() % 9000));  // 0 .. 8999 elements
      auto& p = pieces[r].emplace_back(fresh.begin() + static_cast<std::ptrdiff_t>(at * sizeof(T)),
                                       fresh.begin() + static_cast<std::ptrdiff_t>((at + len) * sizeof(T)));
      regions[r].emplace_back(p.data(), p.size());
      at += len;
    }
  }
  runs.clear();
  for (int r = 0; r < n; ++r)
    runs.push_back(std::async(std::launch::async, [&, r] { return ranks[r]->run(regions[r], t, op, 7); }));
  for (int r = 0; r < n; ++r) ASSERT_TRUE(runs[r].get().ok()) << "rank " << r;
  for (int r = 0; r < n; ++r) {
    std::vector<std::byte> joined;
    for (const auto& p : pieces[r]) joined.insert(joined.end(), p.begin(), p.end());
    ASSERT_EQ(joined, whole[0]) << "rank " << r << " of " << n;
  }
}

TEST(mailbox_allreduce, regions_cut_differently_on_each_rank_reduce_exactly_like_one_buffer) {
  check_regions<float>(2, dtype::f32, reduce_op::average);
  check_regions<float>(2, dtype::f32, reduce_op::sum);
  check_regions<double>(3, dtype::f64, reduce_op::average);
  check_regions<int32_t>(4, dtype::i32, reduce_op::max);
}

TEST(mailbox_allreduce, calls_that_differ_only_past_the_first_piece_fail_naming_both_sizes) {
  auto ranks = make_ranks(2);
  const std::size_t n0 = 3 * (shm::mailbox_slot_bytes / 4), n1 = n0 + 1;  // same first two pieces
  std::vector<float> a(n0, 1.0f), b(n1, 1.0f);
  auto other = std::async(std::launch::async, [&] { return ranks[1]->run(b.data(), n1, dtype::f32, reduce_op::sum); });
  auto st0 = ranks[0]->run(a.data(), n0, dtype::f32, reduce_op::sum);
  auto st1 = other.get();
  EXPECT_EQ(st0.to_string(), "protocol: allreduce of " + std::to_string(n0 * 4) + " bytes of f32 sum on rank 0, but rank 1 posted " +
                                 std::to_string(n1 * 4) +
                                 " bytes of f32 sum: every rank must make the same collective calls in the same order");
  EXPECT_EQ(st1.code(), errc::protocol) << st1.to_string();
}

TEST(mailbox_allreduce, takes_every_size_at_two_ranks_within_its_limit_beyond_and_no_boolean_average) {
  mailbox_allreduce two(0, 2, {}, {}, 4u << 20, 0us);
  EXPECT_TRUE(two.takes(std::size_t{1} << 30, dtype::f32, reduce_op::sum));
  EXPECT_EQ(two.max_bytes(), SIZE_MAX);
  EXPECT_TRUE(two.takes(16, dtype::boolean, reduce_op::max));
  EXPECT_FALSE(two.takes(16, dtype::boolean, reduce_op::average));
  // More ranks: bytes x (N - 2) within the limit.
  mailbox_allreduce three(0, 3, {}, {}, 4u << 20, 0us), four(0, 4, {}, {}, 4u << 20, 0us);
  EXPECT_TRUE(three.takes(4u << 20, dtype::f32, reduce_op::sum));
  EXPECT_FALSE(three.takes((4u << 20) + 4, dtype::f32, reduce_op::sum));
  EXPECT_TRUE(four.takes(2u << 20, dtype::f32, reduce_op::sum));
  EXPECT_FALSE(four.takes((2u << 20) + 4, dtype::f32, reduce_op::sum));
  // 0: nothing, at any size of job.
  mailbox_allreduce off(0, 2, {}, {}, 0, 0us);
  EXPECT_FALSE(off.takes(4, dtype::f32, reduce_op::sum));
  EXPECT_EQ(off.max_bytes(), 0u);
}

}  // namespace
}  // namespace chorus
