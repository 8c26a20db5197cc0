// Reduce-scatter and alltoall: the pure slice/window plan (scatter_plan.hpp), then the real
// chunk ops (make_ring_reducescatter, alltoall_op) driven by the real engine over the
// deterministic local fabric: every dtype and reduce_op against an independent reference,
// N = 1..5 with uneven splits (fewer rows than ranks included), ranks starting in random
// orders, a late rank, mismatched alltoall sizes and a killed rank.
// Randomised: each test prints its seed; CHORUS_TEST_SEED=<n> re-runs with another base seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/collectives/alltoall_op.hpp"
#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/neutral_elements.hpp"
#include "runtime/collectives/reduce.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/collectives/scatter_plan.hpp"
#include "runtime/transport/local/local_transport.hpp"
#include "tests/support/reduce_reference.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace chorus::testing;

uint64_t seed_for(uint64_t salt) { return testing::seed_for("collectives_scatter_test", salt); }

// ---- the pure plan ----------------------------------------------------------------------------

TEST(split_rows, follows_horovod_first_ranks_get_the_extra_rows) {
  auto s = split_rows(10, 4, 4);  // 10 rows of 4 bytes: 3, 3, 2, 2 rows
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].offset, 0u);
  EXPECT_EQ(s[0].length, 12u);
  EXPECT_EQ(s[1].offset, 12u);
  EXPECT_EQ(s[1].length, 12u);
  EXPECT_EQ(s[2].offset, 24u);
  EXPECT_EQ(s[2].length, 8u);
  EXPECT_EQ(s[3].offset, 32u);
  EXPECT_EQ(s[3].length, 8u);
  auto few = split_rows(2, 8, 5);  // fewer rows than ranks: the last three get nothing
  std::vector<std::size_t> lengths;
  for (auto& b : few) lengths.push_back(b.length);
  EXPECT_EQ(lengths, (std::vector<std::size_t>{8, 8, 0, 0, 0}));
  EXPECT_EQ(few[4].offset, 16u);
}

TEST(scatter_windows, cover_the_longest_slice_in_element_aligned_windows) {
  auto slices = split_rows(7, 4, 3);  // 12, 8, 8 bytes
  auto w = scatter_windows(slices, 4, 24, 3);  // 24 / 3 = 8 bytes per window
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], (scatter_window{0, 8}));
  EXPECT_EQ(w[1], (scatter_window{8, 4}));
  auto second = window_of(slices, w[1]);
  EXPECT_EQ(second[0].offset, 8u);
  EXPECT_EQ(second[0].length, 4u);
  EXPECT_EQ(second[1].length, 0u);  // slice 1 has only 8 bytes
  EXPECT_EQ(second[2].length, 0u);
  // A window never cuts an element, and is at least one element.
  auto odd = scatter_windows(split_rows(5, 8, 2), 8, 13, 2);
  for (auto& x : odd) EXPECT_EQ(x.bytes % 8, 0u);
  EXPECT_EQ(odd.size(), 3u);
  // Nothing to move: still one (empty) window, so the operation runs and completes once.
  EXPECT_EQ(scatter_windows(split_rows(0, 4, 3), 4, 64, 3), (std::vector<scatter_window>{{0, 0}}));
  EXPECT_EQ(scatter_windows(slices, 4, 0, 3).size(), 1u);
}

TEST(ring_schedule, reducescatter_is_the_first_half_of_allreduce) {
  for (int n = 1; n <= 6; ++n)
    for (int r = 0; r < n; ++r) {
      auto rs = ring_reducescatter_steps(r, n), ar = ring_allreduce_steps(r, n);
      ASSERT_EQ(rs.size(), static_cast<std::size_t>(n - 1));
      for (std::size_t g = 0; g < rs.size(); ++g) {
        EXPECT_EQ(rs[g].send_block, ar[g].send_block);
        EXPECT_EQ(rs[g].recv_block, ar[g].recv_block);
        EXPECT_TRUE(rs[g].reduce);
      }
    }
}

// ---- ranks on one fabric ----------------------------------------------------------------------

struct cluster {
  cluster(int n, int streams, uint64_t seed)
      : fabric(local::fabric_options{n, streams, 0xC0DE, 64u << 20, false, local::random_delay(seed, 1000ns)}) {
    for (int r = 0; r < n; ++r) engines.push_back(std::make_unique<engine>(fabric.endpoint(r)));
    for (int r = 0; r < n; ++r) fabric.endpoint(r).start(engines[r].get());
  }
  ~cluster() { fabric.stop(); }
  int size() const { return fabric.size(); }
  local::local_fabric fabric;
  std::vector<std::unique_ptr<engine>> engines;
};

// One collective on every rank: the chunk ops of each rank, their outcomes.
struct rank_ops {
  std::vector<std::vector<std::unique_ptr<chunk_op>>> ops;  // by rank
  std::vector<int> calls;
  std::vector<status> result;  // the first error, by rank
  explicit rank_ops(int n) : ops(n), calls(n, 0), result(n) {}
  engine::done_fn done(int r) {
    return [this, r](const status& st) {
      ++calls[r];
      if (!st.ok() && result[r].ok()) result[r] = st;
    };
  }
};

// Starts every op on every rank, each rank in its own random order, with random executor steps
// between starts (frames often arrive before the op: early-frame replay), then runs dry.
void run_all(cluster& c, std::vector<rank_ops*> all, std::mt19937_64& rng) {
  const int n = c.size();
  std::vector<std::vector<std::pair<rank_ops*, std::size_t>>> order(n);
  for (auto* k : all)
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < k->ops[r].size(); ++i) order[r].emplace_back(k, i);
  for (auto& o : order) std::shuffle(o.begin(), o.end(), rng);
  std::vector<std::size_t> next(n, 0);
  for (;;) {
    std::vector<int> ready;
    for (int r = 0; r < n; ++r)
      if (next[r] < order[r].size()) ready.push_back(r);
    if (ready.empty()) break;
    int r = ready[rng() % ready.size()];
    auto [k, i] = order[r][next[r]++];
    c.engines[r]->run(std::move(k->ops[r][i]), k->done(r));
    c.fabric.run_until_idle(rng() % 16);
  }
  c.fabric.run_until_idle();
  EXPECT_EQ(c.fabric.queued(), 0u);
  for (int r = 0; r < n; ++r) EXPECT_EQ(c.engines[r]->in_flight(), 0u) << "rank " << r;
}

std::string first_difference(const std::vector<std::byte>& got, const std::vector<std::byte>& want, dtype t) {
  std::size_t e = size_of(t), i = 0;
  while (i * e < got.size() && std::memcmp(got.data() + i * e, want.data() + i * e, e) == 0) ++i;
  std::string out = "element " + std::to_string(i) + " differs";
  if (is_float(t) && (i + 1) * e <= got.size())
    out += ": got " + std::to_string(load_float(t, got.data(), i)) + ", expected " +
           std::to_string(load_float(t, want.data(), i));
  return out;
}

// ---- reduce-scatter ---------------------------------------------------------------------------

struct scatter_case {
  dtype type;
  reduce_op op;
  int n;
  std::size_t rows, row_elems, chunk_bytes, segment_bytes;
  uint64_t first_sequence;
  std::vector<std::vector<std::byte>> buf;  // by rank: the whole tensor, reduced in place
  std::vector<std::byte> expected;          // the whole tensor, reduced
  std::vector<byte_range> slices;
  rank_ops k;

  scatter_case(dtype t, reduce_op o, int size, std::size_t rows_, std::size_t row_elems_, std::size_t chunk,
               std::size_t segment, uint64_t seq, std::mt19937_64& rng)
      : type(t), op(o), n(size), rows(rows_), row_elems(row_elems_), chunk_bytes(chunk), segment_bytes(segment),
        first_sequence(seq), k(size) {
    const std::size_t e = size_of(t), count = rows * row_elems;
    buf.assign(n, std::vector<std::byte>(count * e));
    std::vector<const std::byte*> in;
    for (int r = 0; r < n; ++r) {
      fill_input(t, o, buf[r].data(), count, rng);
      in.push_back(buf[r].data());
    }
    expected.assign(count * e, std::byte{0});
    reference(t, o, in, expected.data(), count);
    slices = split_rows(rows, row_elems * e, n);
    auto windows = scatter_windows(slices, e, chunk_bytes, n);
    for (int r = 0; r < n; ++r)
      for (std::size_t w = 0; w < windows.size(); ++w)
        k.ops[r].push_back(make_ring_reducescatter(first_sequence + w, static_cast<int>(w % 2), r, n, buf[r].data(),
                                                   window_of(slices, windows[w]), t, o, segment_bytes));
  }
  uint64_t chunks() const { return k.ops[0].size(); }
  std::string describe() const {
    return "reducescatter n=" + std::to_string(n) + " " + std::string(name_of(type)) + " " +
           std::string(name_of(op)) + " rows=" + std::to_string(rows) + "x" + std::to_string(row_elems) +
           " chunk=" + std::to_string(chunk_bytes) + " segment=" + std::to_string(segment_bytes);
  }
  void expect_success() const {
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(describe() + " rank=" + std::to_string(r));
      EXPECT_EQ(k.calls[r], static_cast<int>(chunks()));
      EXPECT_TRUE(k.result[r].ok()) << k.result[r].to_string();
      const auto& s = slices[r];
      std::vector<std::byte> got(buf[r].begin() + s.offset, buf[r].begin() + s.offset + s.length);
      std::vector<std::byte> want(expected.begin() + s.offset, expected.begin() + s.offset + s.length);
      if (got != want) ADD_FAILURE() << first_difference(got, want, type);
    }
  }
};

class reducescatter_exact : public ::testing::TestWithParam<std::tuple<dtype, reduce_op>> {};

TEST_P(reducescatter_exact, every_size_and_uneven_split) {
  auto [t, op] = GetParam();
  std::mt19937_64 rng(seed_for(static_cast<uint64_t>(t) * 16 + static_cast<uint64_t>(op)));
  const std::size_t e = size_of(t);
  for (int n = 1; n <= 5; ++n) {
    cluster c(n, 2, rng());
    std::deque<scatter_case> cases;
    uint64_t seq = 0;
    // rows below, at and above n; uneven splits; one window or many (chunk cuts each slice).
    for (std::size_t rows : {std::size_t{0}, std::size_t{1}, std::size_t(n) - 1 + 2, std::size_t{7}, std::size_t{103}})
      for (std::size_t width : {1, 3}) {
        std::size_t chunk = rng() % 2 ? 0 : (1 + rng() % 5) * e * static_cast<std::size_t>(n);
        std::size_t segment = (1 + rng() % 3) * e + (rng() % 2 ? rng() % e : 0);
        cases.emplace_back(t, op, n, rows, width, chunk, segment, seq, rng);
        seq += cases.back().chunks();
      }
    std::vector<rank_ops*> all;
    for (auto& k : cases) all.push_back(&k.k);
    run_all(c, all, rng);
    for (auto& k : cases) k.expect_success();
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes_and_ops, reducescatter_exact,
                         ::testing::Combine(::testing::ValuesIn(all_dtypes), ::testing::ValuesIn(all_ops)),
                         [](const auto& info) {
                           return std::string(name_of(std::get<0>(info.param))) + "_" +
                                  std::string(name_of(std::get<1>(info.param)));
                         });

TEST(reducescatter, a_late_rank_gets_everything_early_and_completes) {
  std::mt19937_64 rng(seed_for(100));
  for (int n = 2; n <= 5; ++n)
    for (int late = 0; late < n; ++late) {
      SCOPED_TRACE("n=" + std::to_string(n) + " late rank " + std::to_string(late));
      cluster c(n, 2, rng());
      scatter_case k(dtype::i32, reduce_op::sum, n, 11, 2, 16, 8, 5, rng);
      for (int r = 0; r < n; ++r)
        if (r != late)
          for (auto& op : k.k.ops[r]) c.engines[r]->run(std::move(op), k.k.done(r));
      c.fabric.run_until_idle();
      EXPECT_EQ(k.k.calls[late], 0);
      for (auto& op : k.k.ops[late]) c.engines[late]->run(std::move(op), k.k.done(late));
      c.fabric.run_until_idle();
      k.expect_success();
    }
}

// ---- alltoall ---------------------------------------------------------------------------------

struct alltoall_case {
  dtype type;
  int n;
  std::size_t row_elems;
  std::vector<std::vector<std::size_t>> splits;  // [src][dst] rows
  std::vector<std::vector<std::byte>> in, out, expected;
  rank_ops k;

  alltoall_case(dtype t, int size, std::size_t width, std::size_t max_rows, std::size_t segment, uint64_t seq,
                std::mt19937_64& rng)
      : type(t), n(size), row_elems(width), splits(size, std::vector<std::size_t>(size)), in(size), out(size),
        expected(size), k(size) {
    const std::size_t row = width * size_of(t);
    for (auto& s : splits)
      for (auto& x : s) x = rng() % (max_rows + 1);
    for (int r = 0; r < n; ++r) {
      std::size_t rows = std::accumulate(splits[r].begin(), splits[r].end(), std::size_t{0});
      in[r].resize(rows * row);
      fill_input(t, reduce_op::sum, in[r].data(), rows * width, rng);
    }
    for (int d = 0; d < n; ++d)
      for (int s = 0; s < n; ++s) {  // rank d receives, in rank order, rank s's block for d
        std::size_t before = 0;
        for (int j = 0; j < d; ++j) before += splits[s][j];
        auto from = in[s].begin() + static_cast<std::ptrdiff_t>(before * row);
        expected[d].insert(expected[d].end(), from, from + static_cast<std::ptrdiff_t>(splits[s][d] * row));
      }
    for (int r = 0; r < n; ++r) {
      out[r].assign(expected[r].size(), std::byte{0xEE});
      std::vector<std::size_t> send(n), recv(n);
      for (int j = 0; j < n; ++j) {
        send[j] = splits[r][j] * row / size_of(t);
        recv[j] = splits[j][r] * row / size_of(t);
      }
      k.ops[r].push_back(std::make_unique<alltoall_op>(seq, static_cast<int>(seq % 2), r, n, in[r].data(),
                                                       slices_of(send, size_of(t)), out[r].data(),
                                                       slices_of(recv, size_of(t)), size_of(t), segment));
    }
  }
  void expect_success() const {
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE("alltoall n=" + std::to_string(n) + " " + std::string(name_of(type)) + " rank=" +
                   std::to_string(r));
      EXPECT_EQ(k.calls[r], 1);
      EXPECT_TRUE(k.result[r].ok()) << k.result[r].to_string();
      if (out[r] != expected[r]) ADD_FAILURE() << first_difference(out[r], expected[r], type);
    }
  }
};

class alltoall_exact : public ::testing::TestWithParam<dtype> {};

TEST_P(alltoall_exact, random_splits_with_empty_blocks) {
  const dtype t = GetParam();
  std::mt19937_64 rng(seed_for(200 + static_cast<uint64_t>(t)));
  const std::size_t e = size_of(t);
  for (int n = 1; n <= 5; ++n) {
    cluster c(n, 2, rng());
    std::deque<alltoall_case> cases;
    uint64_t seq = 0;
    for (std::size_t max_rows : {0, 1, 4, 40})
      for (std::size_t width : {1, 3}) {
        std::size_t segment = (1 + rng() % 4) * e + (rng() % 2 ? rng() % e : 0);
        cases.emplace_back(t, n, width, max_rows, segment, seq++, rng);
      }
    std::vector<rank_ops*> all;
    for (auto& k : cases) all.push_back(&k.k);
    run_all(c, all, rng);
    for (auto& k : cases) k.expect_success();
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes, alltoall_exact, ::testing::ValuesIn(all_dtypes),
                         [](const auto& info) { return std::string(name_of(info.param)); });

TEST(alltoall, a_late_rank_gets_everything_early_and_completes) {
  std::mt19937_64 rng(seed_for(300));
  for (int n = 2; n <= 5; ++n)
    for (int late = 0; late < n; ++late) {
      cluster c(n, 2, rng());
      alltoall_case k(dtype::i64, n, 2, 5, 16, 9, rng);
      for (int r = 0; r < n; ++r)
        if (r != late) c.engines[r]->run(std::move(k.k.ops[r][0]), k.k.done(r));
      c.fabric.run_until_idle();
      c.engines[late]->run(std::move(k.k.ops[late][0]), k.k.done(late));
      c.fabric.run_until_idle();
      k.expect_success();
    }
}

// A receiver that expects more or fewer bytes than its peer sends fails with errc::protocol
// (every block ends with a marked last frame), and the job is aborted for everybody: no hang.
TEST(alltoall, a_size_mismatch_fails_every_rank_instead_of_hanging) {
  std::mt19937_64 rng(seed_for(400));
  for (int n = 2; n <= 4; ++n)
    for (int delta : {-1, +1}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " delta " + std::to_string(delta));
      cluster c(n, 1, rng());
      rank_ops k(n);
      std::vector<std::vector<std::byte>> in(n, std::vector<std::byte>(64)), out(n, std::vector<std::byte>(64));
      for (int r = 0; r < n; ++r) {
        std::vector<std::size_t> send(n, 2), recv(n, 2);
        if (r == n - 1) recv[0] = static_cast<std::size_t>(2 + delta);  // wrong view of rank 0's block
        k.ops[r].push_back(std::make_unique<alltoall_op>(77, 0, r, n, in[r].data(), slices_of(send, 4),
                                                         out[r].data(), slices_of(recv, 4), 4, 4));
      }
      for (int r = 0; r < n; ++r) c.engines[r]->run(std::move(k.ops[r][0]), k.done(r));
      c.fabric.run_until_idle();
      EXPECT_EQ(k.calls[n - 1], 1);
      EXPECT_EQ(k.result[n - 1].code(), errc::protocol) << k.result[n - 1].to_string();
      for (int r = 0; r < n; ++r) EXPECT_EQ(k.calls[r], 1) << "rank " << r << " still waits";
    }
}

TEST(alltoall, a_killed_rank_ends_every_op_with_connection_lost) {
  std::mt19937_64 rng(seed_for(500));
  for (int n : {2, 3, 5}) {
    const int victim = static_cast<int>(rng() % n);
    cluster c(n, 2, rng());
    alltoall_case k(dtype::f32, n, 4, 50, 8, 3, rng);
    for (int r = 0; r < n; ++r) c.engines[r]->run(std::move(k.k.ops[r][0]), k.k.done(r));
    c.fabric.run_until_idle(rng() % 20);
    c.fabric.kill(victim);
    c.fabric.run_until_idle();
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(k.k.calls[r], 1) << "rank " << r;
      if (r != victim && !k.k.result[r].ok())
        EXPECT_EQ(k.k.result[r].code(), errc::connection_lost) << k.k.result[r].to_string();
    }
  }
}

// ---- identity elements (what a joined rank contributes) ---------------------------------------

TEST(fill_identity, reducing_with_it_leaves_every_value_unchanged) {
  std::mt19937_64 rng(seed_for(600));
  for (dtype t : all_dtypes)
    for (reduce_op op : all_ops) {
      if (op == reduce_op::average) continue;  // reduces like sum; the division is separate
      SCOPED_TRACE(std::string(name_of(t)) + " " + std::string(name_of(op)));
      const std::size_t n = 257, e = size_of(t);
      std::vector<std::byte> x(n * e), id(n * e), y;
      fill_input(t, op, x.data(), n, rng);
      fill_identity(id.data(), n, t, op);
      y = x;
      reduce_into(y.data(), id.data(), n, t, op);
      EXPECT_EQ(y, x);
      y = id;
      reduce_into(y.data(), x.data(), n, t, op);
      EXPECT_EQ(y, x);
    }
}

}  // namespace
}  // namespace chorus
