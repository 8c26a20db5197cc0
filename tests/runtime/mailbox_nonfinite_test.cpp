// The NaN/Inf check on the shared-memory mailboxes (mailbox_allreduce::run with a report):
// every rank folds every rank's input, so each names the ranks whose input held NaN or +-Inf
// with no message of its own. Ranks in threads joined by real mailboxes; NaN, +Inf and -Inf
// placed in chosen ranks' inputs (first element, last element, a later piece of a buffer larger
// than a slot); float sums and averages (checked inside the addition) and max / f16 (scanned)
// at 2, 3 and 4 ranks: every rank's report names exactly those ranks, finite inputs name none,
// and the check leaves the result's bits as the unchecked fold makes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <string>
#include <vector>

#include "runtime/collectives/mailbox_allreduce.hpp"
#include "runtime/compression/cast.hpp"
#include "tests/runtime/mailbox_ranks.hpp"

namespace chorus {
namespace {

// Rank r's input: small integers, so sums are exact; `bad` puts `poison` at element `at`.
template <class T>
std::vector<T> input(int r, std::size_t count, bool bad, std::size_t at, double poison) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<T>((r + static_cast<int>(i % 7)) % 5);
  if (bad) v[at] = static_cast<T>(poison);
  return v;
}

struct outcome {
  std::vector<std::vector<int>> named;  // [rank]: the ranks its report names
  std::vector<std::vector<std::byte>> results;
};

// One allreduce of `count` elements at `n` ranks, the ranks in `bad` holding `poison` at `at`;
// `check` false: no report (the unchecked fold, for the bits).
template <class T>
outcome run(int n, dtype t, reduce_op op, std::size_t count, const std::vector<int>& bad, std::size_t at,
            double poison, bool check = true) {
  auto ranks = make_ranks(n);
  std::vector<std::vector<T>> bufs;
  for (int r = 0; r < n; ++r)
    bufs.push_back(input<T>(r, count, std::find(bad.begin(), bad.end(), r) != bad.end(), at, poison));
  std::vector<nonfinite_report> reports(static_cast<std::size_t>(n));
  std::vector<std::future<status>> runs;
  for (int r = 0; r < n; ++r)
    runs.push_back(std::async(std::launch::async, [&, r] {
      return ranks[r]->run(bufs[r].data(), count, t, op, 7, check ? &reports[r] : nullptr);
    }));
  outcome o;
  for (int r = 0; r < n; ++r) {
    auto st = runs[r].get();
    EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st.to_string();
    o.named.push_back(reports[r].ranks());
    o.results.emplace_back(count * sizeof(T));
    std::memcpy(o.results.back().data(), bufs[r].data(), count * sizeof(T));
  }
  return o;
}

std::string show(const std::vector<int>& v) {
  std::string s = "{";
  for (int r : v) s += " " + std::to_string(r);
  return s + " }";
}

template <class T>
void names_exactly_the_bad_ranks(dtype t, reduce_op op) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // Past a slot: the poison lies in a later piece (mailbox_slot_bytes per post).
  const std::size_t big = shm::mailbox_slot_bytes / sizeof(T) * 2 + 3;
  struct scenario {
    int n;
    std::vector<int> bad;
    std::size_t count, at;
    double poison;
  };
  const std::vector<scenario> cases = {
      {2, {}, 1000, 0, 0},           {2, {0}, 1000, 0, nan},         {2, {1}, 1000, 999, inf},
      {2, {0, 1}, 1000, 500, -inf},  {3, {0}, 1000, 3, nan},         {3, {1}, 1000, 0, inf},
      {3, {2}, 1000, 999, nan},      {3, {}, 1000, 0, 0},            {4, {1, 3}, 1000, 17, -inf},
      {4, {0, 2}, 1000, 999, nan},   {2, {1}, big, big - 1, nan},    {3, {0}, big, big - 2, inf},
  };
  for (const auto& c : cases) {
    auto o = run<T>(c.n, t, op, c.count, c.bad, c.at, c.poison);
    for (int r = 0; r < c.n; ++r)
      EXPECT_EQ(o.named[r], c.bad) << name_of(t) << " " << name_of(op) << " n=" << c.n << " at=" << c.at
                                   << ": rank " << r << " names " << show(o.named[r]) << ", expected "
                                   << show(c.bad);
  }
}

TEST(mailbox_nonfinite, float_sums_and_averages_name_exactly_the_ranks_that_held_nan_or_inf) {
  names_exactly_the_bad_ranks<float>(dtype::f32, reduce_op::sum);
  names_exactly_the_bad_ranks<double>(dtype::f64, reduce_op::sum);
  names_exactly_the_bad_ranks<float>(dtype::f32, reduce_op::average);
}

TEST(mailbox_nonfinite, other_ops_scan_each_input_and_name_the_same_ranks) {
  names_exactly_the_bad_ranks<float>(dtype::f32, reduce_op::max);
  names_exactly_the_bad_ranks<double>(dtype::f64, reduce_op::min);
}

TEST(mailbox_nonfinite, half_precision_inputs_are_scanned) {
  // f16 bits: 0x7e00 NaN, 0x3c00 one.
  for (int n : {2, 3}) {
    auto ranks = make_ranks(n);
    std::vector<std::vector<uint16_t>> bufs(static_cast<std::size_t>(n), std::vector<uint16_t>(100, 0x3c00));
    bufs[static_cast<std::size_t>(n - 1)][42] = 0x7e00;
    std::vector<nonfinite_report> reports(static_cast<std::size_t>(n));
    std::vector<std::future<status>> runs;
    for (int r = 0; r < n; ++r)
      runs.push_back(std::async(std::launch::async, [&, r] {
        return ranks[r]->run(bufs[r].data(), 100, dtype::f16, reduce_op::sum, 0, &reports[r]);
      }));
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(runs[r].get().ok());
      EXPECT_EQ(reports[r].ranks(), std::vector<int>{n - 1}) << "n=" << n << " rank " << r;
    }
  }
}

TEST(mailbox_nonfinite, integer_inputs_are_never_named) {
  auto o = run<int32_t>(3, dtype::i32, reduce_op::sum, 1000, {}, 0, 0);
  for (const auto& named : o.named) EXPECT_TRUE(named.empty()) << show(named);
}

TEST(mailbox_nonfinite, the_check_leaves_the_results_bits_as_the_unchecked_fold_makes_them) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int n : {2, 3, 4})
    for (auto op : {reduce_op::sum, reduce_op::average, reduce_op::max}) {
      auto checked = run<float>(n, dtype::f32, op, 5000, {1}, 77, nan, true);
      auto plain = run<float>(n, dtype::f32, op, 5000, {1}, 77, nan, false);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(checked.results[r], plain.results[r]) << "n=" << n << " " << name_of(op) << " rank " << r;
        EXPECT_EQ(checked.results[r], checked.results[0]) << "rank " << r << " differs from rank 0";
        EXPECT_TRUE(plain.named[r].empty()) << "no report asked, none filled";
      }
    }
}

}  // namespace
}  // namespace chorus
