// chorus-testrank pipeline-wire SEED: compression on the wire and the NaN/Inf check through the
// whole pipeline and the C++ API (tests/multiproc/pipeline_wire_test.cpp runs it with
// CHORUS_CHUNK_BYTES=1048576 and CHORUS_NAN_CHECK=skip). Every rank regenerates every rank's
// inputs from SEED and checks:
//  * in-place fp16/bf16 allreduces (f32, f64, sum, average, prescale), several chunks: equal to
//    a reference that replays the ring's casts element by element (chunk and block layout
//    known), bit for bit;
//  * fused small tensors and a reducescatter: within the documented error bound of the exact
//    sum, and (allreduce) bitwise identical on every rank (an uncompressed min and max of the
//    results must agree);
//  * allgather: every row cast to the wire type and back;
//  * an integer tensor asked to compress fails naming it, the tensor submitted with it succeeds;
//  * NaN/Inf: error mode fails on every rank naming tensor and rank; skip mode (asked for, and
//    the job's default) completes with the same rank list everywhere.
// Prints "pipeline-wire: all checks passed". Exit codes: 0 pass, 1 wrong result, 2 usage,
// 3 an operation failed unexpectedly, 4 an operation hung.
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "chorus/chorus.hpp"
#include "runtime/collectives/ring_schedule.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/half.hpp"

namespace chorus::testrank {
namespace {

using namespace std::chrono_literals;
constexpr auto op_deadline = 60s;
constexpr std::size_t chunk_bytes = 1u << 20;  // CHORUS_CHUNK_BYTES of the test job

int failures = 0;

void fail_check(const std::string& what) {
  std::printf("pipeline-wire WRONG: %s\n", what.c_str());
  std::fflush(stdout);
  ++failures;
}

float wire_round(compression c, float x) {
  return c == compression::fp16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
}
double unit_roundoff(compression c) { return c == compression::fp16 ? 0x1p-11 : 0x1p-8; }

/// Rank r's input of tensor `index` (values exact in f32 when t is f32).
std::vector<double> input_of(uint64_t seed, int index, int r, std::size_t n, dtype t) {
  std::mt19937_64 g(seed * 1000003 + static_cast<uint64_t>(index) * 131 + static_cast<uint64_t>(r));
  std::uniform_real_distribution<double> u(-300.0, 300.0);
  std::vector<double> v(n);
  for (auto& x : v) x = t == dtype::f32 ? double(float(u(g))) : u(g) * (1 + 0x1p-35);
  return v;
}

struct buffer {
  dtype t;
  std::vector<std::byte> bytes;
  buffer(dtype type, const std::vector<double>& v) : t(type), bytes(v.size() * size_of(type)) {
    for (std::size_t i = 0; i < v.size(); ++i) set(i, v[i]);
  }
  std::size_t size() const { return bytes.size() / size_of(t); }
  double get(std::size_t i) const {
    if (t == dtype::f32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    double d;
    std::memcpy(&d, bytes.data() + 8 * i, 8);
    return d;
  }
  void set(std::size_t i, double v) {
    if (t == dtype::f32) {
      const float f = float(v);
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    } else {
      std::memcpy(bytes.data() + 8 * i, &v, 8);
    }
  }
  tensor_view view(std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(size())};
    return tensor_view{bytes.data(), t, shape};
  }
};

status wait(handle& h) { return h.wait(op_deadline); }

/// The ring's value for element i of a block whose chain starts at rank `first` (see
/// runtime/collectives/wire_ring_op.hpp).
double ring_value(const std::vector<std::vector<double>>& in, int first, std::size_t i, compression c, float scale,
                  bool average) {
  const int n = static_cast<int>(in.size());
  float w = wire_round(c, float(in[first][i]) * scale), a = w;
  for (int k = 1; k < n; ++k) {
    a = float(in[(first + k) % n][i]) * scale + w;
    if (k + 1 < n) w = wire_round(c, a);
  }
  if (average && n > 1) a = a / float(n);
  return wire_round(c, a);
}

/// An in-place compressed allreduce, checked bit for bit against the ring replayed per chunk.
void exact_allreduce(uint64_t seed, int index, dtype t, std::size_t n, compression c, reduce_op op, float scale,
                     int rank, int size) {
  std::vector<std::vector<double>> in;
  for (int r = 0; r < size; ++r) in.push_back(input_of(seed, index, r, n, t));
  buffer b(t, in[static_cast<std::size_t>(rank)]);
  const std::string name = "wire.exact." + std::to_string(index);
  auto h = allreduce_async(name, b.view(), op, op_options{c, nan_check::off, scale});
  if (auto st = wait(h); !st.ok()) return fail_check(name + ": " + st.to_string());
  // Compressed buckets are cut by wire bytes: CHORUS_CHUNK_BYTES of fp16/bf16 per chunk.
  const std::size_t per_chunk = chunk_bytes / 2;
  for (std::size_t c0 = 0; c0 < n; c0 += per_chunk) {
    const std::size_t cn = std::min(per_chunk, n - c0);
    for (int blk = 0; blk < size; ++blk)
      for (std::size_t i = c0 + block_begin(cn, size, blk); i < c0 + block_begin(cn, size, blk + 1); ++i) {
        const double want = ring_value(in, blk, i, c, scale, op == reduce_op::average);
        if (std::bit_cast<uint64_t>(b.get(i)) != std::bit_cast<uint64_t>(want))
          return fail_check(name + " element " + std::to_string(i) + ": got " + std::to_string(b.get(i)) +
                            ", expected " + std::to_string(want));
      }
  }
}

/// The documented bound: |result - exact| <= N (u + 2^-23) sum |x_r| + N 2^-24 (divided by N
/// for an average), u = 2^-11 (fp16) or 2^-8 (bf16).
bool within_bound(const std::vector<std::vector<double>>& in, std::size_t i, double got, compression c, bool average) {
  const int n = static_cast<int>(in.size());
  double sum = 0, mag = 0;
  for (const auto& x : in) {
    sum += x[i];
    mag += std::fabs(x[i]);
  }
  double bound = n * (unit_roundoff(c) + 0x1p-23) * mag + n * 0x1p-24;
  if (average) {
    sum /= n;
    bound /= n;
  }
  return std::fabs(got - sum) <= bound;
}

/// Whether every rank holds the same bits: an uncompressed min and max over the ranks agree.
bool same_on_every_rank(buffer& b, const std::string& name) {
  buffer lo = b, hi = b;
  op_options plain{compression::none, nan_check::off, 1.0f};
  auto h1 = allreduce_async(name + ".min", lo.view(), reduce_op::min, plain);
  auto h2 = allreduce_async(name + ".max", hi.view(), reduce_op::max, plain);
  if (!wait(h1).ok() || !wait(h2).ok()) return false;
  return lo.bytes == hi.bytes && lo.bytes == b.bytes;
}

void fused_allreduces(uint64_t seed, int index, compression c, int rank, int size) {
  const std::size_t sizes[] = {1, 7, 100, 1001, 33};
  std::vector<std::vector<std::vector<double>>> in;
  std::vector<buffer> bufs;
  std::vector<op_name> names;
  std::vector<tensor_view> views;
  for (std::size_t k = 0; k < std::size(sizes); ++k) {
    in.emplace_back();
    for (int r = 0; r < size; ++r) in.back().push_back(input_of(seed, index + int(k), r, sizes[k], dtype::f32));
    bufs.emplace_back(dtype::f32, in.back()[static_cast<std::size_t>(rank)]);
    names.emplace_back("wire.fused." + std::to_string(index) + "." + std::to_string(k));
  }
  for (auto& b : bufs) views.push_back(b.view());
  auto hs = allreduce_async(names, views, reduce_op::sum, op_options{c, std::nullopt, 1.0f});
  for (std::size_t k = 0; k < hs.size(); ++k) {
    if (auto st = wait(hs[k]); !st.ok()) return fail_check(names[k].name + ": " + st.to_string());
    for (std::size_t i = 0; i < sizes[k]; ++i)
      if (!within_bound(in[k], i, bufs[k].get(i), c, false))
        return fail_check(names[k].name + " element " + std::to_string(i) + " outside the error bound");
    if (!same_on_every_rank(bufs[k], names[k].name)) fail_check(names[k].name + ": ranks hold different bits");
  }
}

void allgather_check(uint64_t seed, int index, compression c, int rank, int size) {
  const int64_t cols = 5;
  std::vector<double> all;
  for (int r = 0; r < size; ++r) {
    auto v = input_of(seed, index, r, static_cast<std::size_t>((3 + r) * cols), dtype::f32);
    all.insert(all.end(), v.begin(), v.end());
  }
  buffer mine(dtype::f32, input_of(seed, index, rank, static_cast<std::size_t>((3 + rank) * cols), dtype::f32));
  auto h = allgather_async("wire.gather." + std::to_string(index), mine.view({3 + rank, cols}),
                           op_options{c, std::nullopt, 1.0f});
  if (auto st = wait(h); !st.ok()) return fail_check("allgather: " + st.to_string());
  const auto& g = h.gathered();
  if (g.size() != all.size() * 4) return fail_check("allgather: " + std::to_string(g.size()) + " bytes");
  for (std::size_t i = 0; i < all.size(); ++i) {
    float f;
    std::memcpy(&f, g.data() + 4 * i, 4);
    if (f != wire_round(c, float(all[i]))) return fail_check("allgather element " + std::to_string(i));
  }
}

void reducescatter_check(uint64_t seed, int index, compression c, int rank, int size) {
  const int64_t rows = size * 1000 + 3, cols = 2;
  const auto n = static_cast<std::size_t>(rows * cols);
  std::vector<std::vector<double>> in;
  for (int r = 0; r < size; ++r) in.push_back(input_of(seed, index, r, n, dtype::f32));
  buffer mine(dtype::f32, in[static_cast<std::size_t>(rank)]);
  auto h = reducescatter_async("wire.scatter." + std::to_string(index), mine.view({rows, cols}), reduce_op::average,
                               op_options{c, std::nullopt, 1.0f});
  if (auto st = wait(h); !st.ok()) return fail_check("reducescatter: " + st.to_string());
  int64_t first = 0;
  for (int r = 0; r < rank; ++r) first += reducescatter_rows(rows, size, r);
  const auto& g = h.gathered();
  for (std::size_t i = 0; i < g.size() / 4; ++i) {
    float f;
    std::memcpy(&f, g.data() + 4 * i, 4);
    if (!within_bound(in, static_cast<std::size_t>(first * cols) + i, f, c, true))
      return fail_check("reducescatter element " + std::to_string(i) + " outside the error bound");
  }
}

void integer_refused(int rank) {
  std::vector<int32_t> ints(10, rank);
  std::vector<float> floats(10, 1.0f);
  auto hs = allreduce_async({op_name("wire.ints"), op_name("wire.beside")},
                            {tensor_view{ints.data(), dtype::i32, {10}}, tensor_view{floats.data(), dtype::f32, {10}}},
                            reduce_op::sum, op_options{compression::fp16, std::nullopt, 1.0f});
  const auto st = wait(hs[0]);
  if (st.ok() || st.code() != errc::invalid_argument || st.message().find("'wire.ints'") == std::string::npos)
    fail_check("integer tensor with compression: " + st.to_string());
  else
    std::printf("pipeline-wire integer refused: %s\n", st.message().c_str());
  if (auto ok = wait(hs[1]); !ok.ok()) fail_check("the tensor beside the integer one: " + ok.to_string());
}

void nan_checks(int rank, int size) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // error: the last rank holds a NaN.
  std::vector<float> a(100, 1.0f);
  if (rank == size - 1) a[50] = nan;
  auto h = allreduce_async("nan.err", tensor_view{a.data(), dtype::f32, {100}}, reduce_op::sum,
                           op_options{std::nullopt, nan_check::error, 1.0f});
  auto st = wait(h);
  const std::string want = "rank(s) " + std::to_string(size - 1) + " ";
  if (st.ok() || st.message().find("'nan.err'") == std::string::npos || st.message().find(want) == std::string::npos)
    fail_check("nan.err: " + st.to_string());
  else
    std::printf("pipeline-wire nan error: %s\n", st.message().c_str());
  // skip, compressed: rank 0 holds an Inf; a clean one beside it.
  std::vector<float> b(3000, 2.0f), clean(10, 1.0f);
  if (rank == 0) b[2999] = -inf;
  auto hb = allreduce_async("nan.skip", tensor_view{b.data(), dtype::f32, {3000}}, reduce_op::sum,
                            op_options{compression::fp16, nan_check::skip, 1.0f});
  auto hc = allreduce_async("nan.clean", tensor_view{clean.data(), dtype::f32, {10}}, reduce_op::sum,
                            op_options{std::nullopt, nan_check::skip, 1.0f});
  if (auto s = wait(hb); !s.ok() || hb.nonfinite_ranks() != std::vector<int>{0})
    fail_check("nan.skip: " + s.to_string() + " ranks=" + std::to_string(hb.nonfinite_ranks().size()));
  if (auto s = wait(hc); !s.ok() || !hc.nonfinite_ranks().empty()) fail_check("nan.clean: " + s.to_string());
  // the job's default (CHORUS_NAN_CHECK=skip): ranks 1 and size-1 hold NaN, uncompressed f64.
  std::vector<double> d(77, 0.5);
  if (rank == 1 || rank == size - 1) d[rank] = std::numeric_limits<double>::quiet_NaN();
  auto hd = allreduce_async("nan.default", tensor_view{d.data(), dtype::f64, {77}}, reduce_op::average);
  std::vector<int> want_ranks = size - 1 == 1 ? std::vector<int>{1} : std::vector<int>{1, size - 1};
  if (auto s = wait(hd); !s.ok() || hd.nonfinite_ranks() != want_ranks) fail_check("nan.default: " + s.to_string());
  std::printf("pipeline-wire nan skip: ranks agreed\n");
}

}  // namespace

int run_pipeline_wire(int argc, char** argv) {
  if (argc < 3) return 2;
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  if (auto st = init(); !st.ok()) {
    std::printf("testrank error: init: %s\n", st.to_string().c_str());
    return 3;
  }
  const int rank = chorus::rank(), size = chorus::size();
  std::printf("pipeline-wire rank=%d size=%d seed=%llu\n", rank, size, static_cast<unsigned long long>(seed));
  // Large enough for several chunks of 1 MiB on the wire (524288 elements each), and in place
  // (>= CHORUS_IN_PLACE_BYTES).
  exact_allreduce(seed, 1, dtype::f32, 3 * 262144 + 5, compression::fp16, reduce_op::sum, 1.0f, rank, size);
  exact_allreduce(seed, 2, dtype::f32, 2 * 262144 + 77, compression::bf16, reduce_op::average, 1.0f, rank, size);
  exact_allreduce(seed, 3, dtype::f64, 524288 + 3, compression::fp16, reduce_op::sum, 0.25f, rank, size);
  exact_allreduce(seed, 4, dtype::f64, 524288 + 131072 + 1, compression::bf16, reduce_op::average, 1.0f, rank, size);
  fused_allreduces(seed, 10, compression::fp16, rank, size);
  fused_allreduces(seed, 20, compression::bf16, rank, size);
  allgather_check(seed, 30, compression::fp16, rank, size);
  allgather_check(seed, 31, compression::bf16, rank, size);
  reducescatter_check(seed, 40, compression::fp16, rank, size);
  reducescatter_check(seed, 41, compression::bf16, rank, size);
  integer_refused(rank);
  nan_checks(rank, size);
  shutdown();
  if (failures) return 1;
  std::printf("pipeline-wire: all checks passed\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace chorus::testrank
