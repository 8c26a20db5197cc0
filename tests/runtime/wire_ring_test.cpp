// The compressed / checked ring (runtime/collectives/wire_ring_op.hpp) driven by the real
// engine over the deterministic local fabric: allreduce (sum, average, prescale), reduce-scatter
// and allgather with fp16 and bf16 on the wire, f32 and f64 data, N = 1..4, odd sizes and many
// segments, against a reference that replays the ring's casts element by element; every rank
// ends with the same bits. The NaN/Inf check: the ranks holding NaN/Inf are agreed by all.
// Randomised: CHORUS_TEST_SEED=<n> re-runs with another base seed.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/wire_ring_op.hpp"
#include "runtime/core/half.hpp"
#include "runtime/transport/local/local_transport.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

uint64_t seed_for(uint64_t salt) { return testing::seed_for("wire_ring_test", salt); }

struct cluster {
  cluster(int n, uint64_t seed)
      : fabric(local::fabric_options{n, 2, 0xC0DE, 64u << 20, false, local::random_delay(seed, 1000ns)}) {
    for (int r = 0; r < n; ++r) engines.push_back(std::make_unique<engine>(fabric.endpoint(r)));
    for (int r = 0; r < n; ++r) fabric.endpoint(r).start(engines[r].get());
  }
  ~cluster() { fabric.stop(); }
  local::local_fabric fabric;
  std::vector<std::unique_ptr<engine>> engines;
};

float to_wire_and_back(compression c, float x) {
  return c == compression::fp16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
}

enum class kind { allreduce, reducescatter, allgather };
const char* name_of(kind k) {
  return k == kind::allreduce ? "allreduce" : k == kind::reducescatter ? "reducescatter" : "allgather";
}

// One collective on every rank: inputs as doubles (exact in f32 when t is f32), buffers, results.
struct wire_case {
  kind what;
  dtype t;
  reduce_op op;
  compression c;
  float prescale;
  int n;
  std::size_t count;    // elements per rank (allgather: rank r has count + r)
  std::size_t segment;  // bytes
  std::vector<std::vector<double>> in;
  std::vector<std::vector<std::byte>> buf;
  std::vector<int> calls;
  std::vector<status> result;
  std::shared_ptr<nonfinite_report> report[8];

  std::string describe() const {
    return std::string(name_of(what)) + " " + std::string(chorus::name_of(t)) + " " + std::string(chorus::name_of(op)) +
           " " + std::string(chorus::name_of(c)) + " prescale=" + std::to_string(prescale) + " n=" + std::to_string(n) +
           " count=" + std::to_string(count) + " segment=" + std::to_string(segment);
  }
  std::size_t rank_count(int r) const { return what == kind::allgather ? count + static_cast<std::size_t>(r) : count; }
  std::size_t gathered() const {
    std::size_t s = 0;
    for (int r = 0; r < n; ++r) s += rank_count(r);
    return s;
  }
  std::size_t esize() const { return size_of(t); }
  double get(int r, std::size_t i) const {
    if (t == dtype::f32) {
      float v;
      std::memcpy(&v, buf[r].data() + 4 * i, 4);
      return v;
    }
    double v;
    std::memcpy(&v, buf[r].data() + 8 * i, 8);
    return v;
  }
  void set(std::vector<std::byte>& b, std::size_t i, double v) const {
    if (t == dtype::f32) {
      const float f = float(v);
      std::memcpy(b.data() + 4 * i, &f, 4);
    } else {
      std::memcpy(b.data() + 8 * i, &v, 8);
    }
  }

  void fill(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(-300.0, 300.0);
    in.assign(n, {});
    buf.assign(n, {});
    calls.assign(n, 0);
    result.assign(n, status{});
    const std::size_t total = what == kind::allgather ? gathered() : count;
    for (int r = 0; r < n; ++r) {
      in[r].resize(rank_count(r));
      for (auto& v : in[r]) v = t == dtype::f32 ? double(float(u(rng))) : u(rng) * (1 + 0x1p-35);
      buf[r].assign(total * esize(), std::byte{0xEE});
      std::size_t at = 0;
      if (what == kind::allgather)
        for (int q = 0; q < r; ++q) at += rank_count(q);
      for (std::size_t i = 0; i < in[r].size(); ++i) set(buf[r], at + i, in[r][i]);
      report[r] = std::make_shared<nonfinite_report>();
    }
  }

  std::unique_ptr<chunk_op> make(int r, uint64_t seq, bool check) {
    wire_options o{c, check, prescale, report[r]};
    switch (what) {
      case kind::allreduce:
        return make_wire_ring_allreduce(seq, 0, r, n, buf[r].data(), count, t, op, segment, o);
      case kind::reducescatter:
        return make_wire_ring_reducescatter(seq, 1, r, n, buf[r].data(), slices(), t, op, segment, o);
      case kind::allgather: {
        std::vector<std::size_t> counts;
        for (int q = 0; q < n; ++q) counts.push_back(rank_count(q));
        return make_wire_ring_allgather(seq, 0, r, n, buf[r].data(), counts, t, segment, o);
      }
    }
    return nullptr;
  }
  // Reduce-scatter: rank q's slice of the count elements (uneven on purpose).
  std::vector<byte_range> slices() const {
    std::vector<byte_range> s;
    std::size_t at = 0;
    for (int q = 0; q < n; ++q) {
      const std::size_t len = q + 1 == n ? count - at : std::min(count - at, count / n + (q % 2));
      s.push_back({at * esize(), len * esize()});
      at += len;
    }
    return s;
  }

  // What the ring computes for element i of a block whose chain starts at rank `first`: the
  // first rank sends wire(x * prescale); each next rank adds its own x * prescale in f32 to
  // the widened wire value and sends that cast; the last (the owner) divides (average) and
  // casts once; everyone widens that.
  double reduced(int first, std::size_t i) const {
    float w = to_wire_and_back(c, float(in[first][i]) * prescale);
    float a = w;
    for (int k = 1; k < n; ++k) {
      const int r = (first + k) % n;
      a = float(in[r][i]) * prescale + w;
      if (k + 1 < n) w = to_wire_and_back(c, a);
    }
    if (op == reduce_op::average && n > 1) a = a / float(n);
    return double(to_wire_and_back(c, a));
  }

  void expect_results() const {
    SCOPED_TRACE(describe());
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(calls[r], 1) << "rank " << r;
      ASSERT_TRUE(result[r].ok()) << result[r].to_string();
    }
    if (what == kind::allreduce) {
      for (int b = 0; b < n; ++b) {
        const std::size_t lo = block_begin(count, n, b), hi = block_begin(count, n, b + 1);
        for (std::size_t i = lo; i < hi; ++i) {
          const double want = reduced(b, i);
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(std::bit_cast<uint64_t>(get(r, i)), std::bit_cast<uint64_t>(want))
                << "rank " << r << " element " << i << ": got " << get(r, i) << ", expected " << want;
        }
      }
    } else if (what == kind::reducescatter) {
      const auto s = slices();
      for (int q = 0; q < n; ++q)
        for (std::size_t i = s[q].offset / esize(); i < (s[q].offset + s[q].length) / esize(); ++i)
          ASSERT_EQ(get(q, i), reduced((q + 1) % n, i)) << "rank " << q << " element " << i;
    } else {
      std::size_t at = 0;
      for (int q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < rank_count(q); ++i) {
          const double want = double(to_wire_and_back(c, float(in[q][i])));
          for (int r = 0; r < n; ++r) ASSERT_EQ(get(r, at + i), want) << "rank " << r << " part " << q << " i " << i;
        }
        at += rank_count(q);
      }
    }
  }
};

void run(wire_case& k, std::mt19937_64& rng, bool check = false, uint64_t seq = 1) {
  cluster cl(k.n, rng());
  std::vector<int> order(k.n);
  for (int r = 0; r < k.n; ++r) order[r] = r;
  std::shuffle(order.begin(), order.end(), rng);
  for (int r : order) {
    cl.engines[r]->run(k.make(r, seq, check), [&k, r](const status& st) {
      ++k.calls[r];
      k.result[r] = st;
    });
    cl.fabric.run_until_idle(rng() % 8);
  }
  cl.fabric.run_until_idle();
  EXPECT_EQ(cl.fabric.queued(), 0u);
}

class WireRing : public ::testing::TestWithParam<compression> {};

TEST_P(WireRing, AllreduceMatchesTheCastReferenceOnEveryRank) {
  std::mt19937_64 rng(seed_for(uint64_t(GetParam())));
  for (int n = 1; n <= 4; ++n)
    for (dtype t : {dtype::f32, dtype::f64})
      for (reduce_op op : {reduce_op::sum, reduce_op::average})
        for (float prescale : {1.0f, 0.5f})
          for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1001}}) {
            wire_case k{kind::allreduce, t, op, GetParam(), prescale, n, count, 2 + 2 * (rng() % 40)};
            k.fill(rng);
            run(k, rng);
            k.expect_results();
            if (::testing::Test::HasFatalFailure()) return;
          }
}

TEST_P(WireRing, ReducescatterAndAllgatherMatchTheCastReference) {
  std::mt19937_64 rng(seed_for(10 + uint64_t(GetParam())));
  for (int n = 1; n <= 4; ++n)
    for (dtype t : {dtype::f32, dtype::f64})
      for (std::size_t count : {std::size_t{5}, std::size_t{333}}) {
        wire_case rs{kind::reducescatter, t, reduce_op::average, GetParam(), 1.0f, n, count, 2 + 2 * (rng() % 20)};
        rs.fill(rng);
        run(rs, rng);
        rs.expect_results();
        wire_case ag{kind::allgather, t, reduce_op::sum, GetParam(), 1.0f, n, count, 2 + 2 * (rng() % 20)};
        ag.fill(rng);
        run(ag, rng);
        ag.expect_results();
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST_P(WireRing, NonFiniteInputsAreReportedAlikeOnEveryRank) {
  std::mt19937_64 rng(seed_for(20 + uint64_t(GetParam())));
  const double bad[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity()};
  for (compression c : {GetParam(), compression::none})
    for (int n = 1; n <= 4; ++n)
      for (kind what : {kind::allreduce, kind::reducescatter, kind::allgather})
        for (int holder = -1; holder < n; ++holder) {
          wire_case k{what, dtype::f32, reduce_op::sum, c, 1.0f, n, 37, 2 + 2 * (rng() % 10)};
          k.fill(rng);
          std::vector<int> want;
          if (holder >= 0) {
            want.push_back(holder);
            std::size_t at = 0;
            if (what == kind::allgather)
              for (int q = 0; q < holder; ++q) at += k.rank_count(q);
            k.set(k.buf[holder], at + rng() % k.rank_count(holder), bad[rng() % 3]);
            if (n > 2 && rng() % 2) {  // a second rank too
              const int other = (holder + 1) % n;
              std::size_t o = 0;
              if (what == kind::allgather)
                for (int q = 0; q < other; ++q) o += k.rank_count(q);
              k.set(k.buf[other], o, bad[0]);
              want.push_back(other);
              std::sort(want.begin(), want.end());
            }
          }
          run(k, rng, true);
          for (int r = 0; r < n; ++r) {
            ASSERT_EQ(k.calls[r], 1);
            ASSERT_TRUE(k.result[r].ok()) << k.result[r].to_string();
            EXPECT_EQ(k.report[r]->ranks(), want) << k.describe() << " rank " << r << " holder " << holder;
          }
        }
}

TEST(WireRingPlain, CheckedPlainAllreduceStillSumsExactly) {
  std::mt19937_64 rng(seed_for(99));
  for (int n = 1; n <= 4; ++n) {
    wire_case k{kind::allreduce, dtype::f64, reduce_op::average, compression::none, 2.0f, n, 101, 24};
    k.fill(rng);
    run(k, rng, true);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(k.result[r].ok());
      for (std::size_t i = 0; i < k.count; ++i) {
        double want = 0;
        for (int q = 0; q < n; ++q) want += k.in[q][i] * 2.0;
        EXPECT_NEAR(k.get(r, i), want / n, 1e-9) << "rank " << r << " i " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Wire, WireRing, ::testing::Values(compression::fp16, compression::bf16),
                         [](const auto& info) { return std::string(name_of(info.param)); });

}  // namespace
}  // namespace chorus
