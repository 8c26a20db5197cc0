// Exactness checks of every collective: inputs are small integers, so sums, products, mins and
// maxes are exact in every dtype, and averages are checked against the exact quotient.
#include "tests/multiproc/rank/collective_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "runtime/core/half.hpp"

namespace chorus::testrank {
namespace {

// Rank r's input element i, a small integer (|v| <= 6 keeps products of up to 4 ranks exact).
int64_t input(int r, std::size_t i) { return static_cast<int64_t>((i * 7 + static_cast<std::size_t>(r) * 13) % 13) - 6; }
int64_t input_u8(int r, std::size_t i) { return static_cast<int64_t>((i * 5 + static_cast<std::size_t>(r) * 3) % 7); }

double to_double(const std::vector<std::byte>& buf, dtype t, std::size_t i) {
  const std::byte* p = buf.data() + i * size_of(t);
  switch (t) {
    case dtype::f16: { uint16_t v; std::memcpy(&v, p, 2); return f16_to_f32(v); }
    case dtype::bf16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_f32(v); }
    case dtype::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case dtype::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case dtype::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case dtype::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case dtype::u8: return static_cast<double>(static_cast<uint8_t>(*p));
  }
  return 0;
}

void store(std::vector<std::byte>& buf, dtype t, std::size_t i, int64_t x) {
  std::byte* p = buf.data() + i * size_of(t);
  switch (t) {
    case dtype::f16: { uint16_t v = f32_to_f16(static_cast<float>(x)); std::memcpy(p, &v, 2); break; }
    case dtype::bf16: { uint16_t v = f32_to_bf16(static_cast<float>(x)); std::memcpy(p, &v, 2); break; }
    case dtype::f32: { float v = static_cast<float>(x); std::memcpy(p, &v, 4); break; }
    case dtype::f64: { double v = static_cast<double>(x); std::memcpy(p, &v, 8); break; }
    case dtype::i32: { int32_t v = static_cast<int32_t>(x); std::memcpy(p, &v, 4); break; }
    case dtype::i64: { std::memcpy(p, &x, 8); break; }
    case dtype::u8: { *p = static_cast<std::byte>(x); break; }
  }
}

int64_t value(dtype t, int r, std::size_t i) { return t == dtype::u8 ? input_u8(r, i) : input(r, i); }

double expected(dtype t, reduce_op op, int n, std::size_t i) {
  double acc = static_cast<double>(value(t, 0, i));
  for (int r = 1; r < n; ++r) {
    double x = static_cast<double>(value(t, r, i));
    switch (op) {
      case reduce_op::sum: case reduce_op::average: acc += x; break;
      case reduce_op::min: acc = std::min(acc, x); break;
      case reduce_op::max: acc = std::max(acc, x); break;
      case reduce_op::product: acc *= x; break;
    }
  }
  if (op == reduce_op::average) {
    bool integral = t == dtype::i32 || t == dtype::i64 || t == dtype::u8;
    acc = integral ? std::trunc(acc / n) : acc / n;
  }
  return acc;
}

status mismatch(const std::string& what, std::size_t i, double got, double want) {
  std::ostringstream os;
  os << what << ": element " << i << " is " << got << ", expected " << want;
  return status{errc::internal, os.str()};
}

status check_allreduce(communicator& comm, dtype t, reduce_op op, std::size_t count, allreduce_algorithm algo) {
  std::vector<std::byte> buf(count * size_of(t));
  for (std::size_t i = 0; i < count; ++i) store(buf, t, i, value(t, comm.rank(), i));
  auto st = comm.allreduce(buf.data(), count, t, op, algo);
  std::ostringstream what;
  what << "allreduce " << name_of(t) << " " << name_of(op) << " count=" << count
       << (algo == allreduce_algorithm::ring ? " ring" : " recursive-doubling");
  if (!st.ok()) return status{st.code(), what.str() + ": " + st.message()};
  // The inputs repeat every 13 (u8: 7) elements, so the expected values do every 91: computed
  // once, not once per element over every rank (64 ranks x 2^18 elements spent most of the
  // many-ranks test's CPU there).
  constexpr std::size_t period = 91;
  std::vector<double> wants(std::min(count, period));
  for (std::size_t k = 0; k < wants.size(); ++k) wants[k] = expected(t, op, comm.size(), k);
  for (std::size_t i = 0; i < count; ++i) {
    double got = to_double(buf, t, i), want = wants[i % period];
    // Averages of floats: the one division rounds in the dtype; half types hold 8-11 bits.
    double tol = 0;
    if (t == dtype::bf16 && op == reduce_op::product) tol = 8e-3 * std::abs(want);  // 8-bit mantissa
    if (op == reduce_op::average) {
      if (t == dtype::f16) tol = 1e-3 * std::max(1.0, std::abs(want));
      else if (t == dtype::bf16) tol = 8e-3 * std::max(1.0, std::abs(want));
      else if (t == dtype::f32) tol = 1e-6 * std::max(1.0, std::abs(want));
      else if (t == dtype::f64) tol = 1e-15 * std::max(1.0, std::abs(want));
    }
    if (std::abs(got - want) > tol) return mismatch(what.str(), i, got, want);
  }
  return {};
}

status check_broadcast(communicator& comm, std::size_t count, int root) {
  std::vector<int32_t> buf(count);
  for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<int32_t>(comm.rank() == root ? i * 3 + 1 : 0);
  auto st = comm.broadcast(buf.data(), count, dtype::i32, root);
  std::string what = "broadcast count=" + std::to_string(count) + " root=" + std::to_string(root);
  if (!st.ok()) return status{st.code(), what + ": " + st.message()};
  for (std::size_t i = 0; i < count; ++i)
    if (buf[i] != static_cast<int32_t>(i * 3 + 1)) return mismatch(what, i, buf[i], static_cast<double>(i * 3 + 1));
  return {};
}

status check_allgather(communicator& comm, std::size_t base) {
  int n = comm.size();
  std::vector<std::size_t> counts(n);
  std::size_t total = 0;
  for (int r = 0; r < n; ++r) total += counts[r] = base + (base ? static_cast<std::size_t>(r) : 0);
  std::vector<float> in(counts[comm.rank()]);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(comm.rank() * 1000 + static_cast<int>(i % 1000));
  std::vector<float> out(total, -1.0f);
  auto st = comm.allgather(in.data(), out.data(), counts, dtype::f32);
  std::string what = "allgather base=" + std::to_string(base);
  if (!st.ok()) return status{st.code(), what + ": " + st.message()};
  std::size_t at = 0;
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < counts[r]; ++i, ++at) {
      float want = static_cast<float>(r * 1000 + static_cast<int>(i % 1000));
      if (out[at] != want) return mismatch(what, at, out[at], want);
    }
  return {};
}

}  // namespace

status check_all_collectives(communicator& comm) {
  const std::size_t small_counts[] = {0, 1, 1001, 1024};
  const dtype all_types[] = {dtype::f16, dtype::bf16, dtype::f32, dtype::f64, dtype::i32, dtype::i64, dtype::u8};
  const reduce_op all_ops[] = {reduce_op::sum, reduce_op::average, reduce_op::min, reduce_op::max, reduce_op::product};
  for (auto algo : {allreduce_algorithm::ring, allreduce_algorithm::recursive_doubling})
    for (auto t : all_types)
      for (auto op : all_ops)
        for (auto c : small_counts)
          if (auto st = check_allreduce(comm, t, op, c, algo); !st.ok()) return st;
  // 16 MiB: several chunks over every stream, many segments per chunk.
  if (auto st = check_allreduce(comm, dtype::f32, reduce_op::sum, 4u << 20, allreduce_algorithm::ring); !st.ok())
    return st;
  if (auto st = check_allreduce(comm, dtype::f64, reduce_op::max, 2u << 20, allreduce_algorithm::ring); !st.ok())
    return st;
  for (int root = 0; root < comm.size(); ++root)
    for (auto c : small_counts)
      if (auto st = check_broadcast(comm, c, root); !st.ok()) return st;
  if (auto st = check_broadcast(comm, 4u << 20, comm.size() - 1); !st.ok()) return st;
  for (std::size_t base : {std::size_t{0}, std::size_t{1}, std::size_t{1001}, std::size_t{1024},
                           (std::size_t{4} << 20) / static_cast<std::size_t>(comm.size())})
    if (auto st = check_allgather(comm, base); !st.ok()) return st;
  return comm.barrier();
}

status check_few_collectives(communicator& comm) {
  for (auto algo : {allreduce_algorithm::automatic, allreduce_algorithm::ring, allreduce_algorithm::recursive_doubling})
    for (std::size_t c : {std::size_t{1}, std::size_t{1001}, std::size_t{1} << 18})
      if (auto st = check_allreduce(comm, dtype::f32, reduce_op::sum, c, algo); !st.ok()) return st;
  if (auto st = check_allreduce(comm, dtype::i64, reduce_op::max, 4097, allreduce_algorithm::ring); !st.ok())
    return st;
  for (int root : {0, comm.size() - 1})
    if (auto st = check_broadcast(comm, 1001, root); !st.ok()) return st;
  for (std::size_t base : {std::size_t{1}, std::size_t{1001}})
    if (auto st = check_allgather(comm, base); !st.ok()) return st;
  return comm.barrier();
}

status allreduce_16mib_once(communicator& comm, int iteration) {
  std::vector<float> buf(4u << 20);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(comm.rank() + iteration);
  auto st = comm.allreduce(buf.data(), buf.size(), dtype::f32, reduce_op::sum);
  if (!st.ok()) return st;
  float want = 0;
  for (int r = 0; r < comm.size(); ++r) want += static_cast<float>(r + iteration);
  for (std::size_t i = 0; i < buf.size(); i += 4097)
    if (buf[i] != want) return mismatch("allreduce 16 MiB", i, buf[i], want);
  return {};
}

}  // namespace chorus::testrank
