// chorus-testrank pipeline-exact SEED [STEPS]: the same 200 tensors on every rank (kinds,
// dtypes, shapes and ops drawn from SEED), enqueued through the C++ API in an order and with
// delays drawn from a per-rank seed derived from SEED; every result is checked exactly.
// Inputs are small integers, so every dtype (f16, bf16 and u8 included) holds every input,
// sum, product and average exactly; an average's inputs sum to size * base.
// chorus-testrank pipeline-soak OPS SEED: the same workload for OPS operations per rank (OPS/200
// steps), where one tensor in ten takes a fresh name every step; after the first step it notes
// the process' resident memory and open descriptors, and at the end prints
// "RESULT soak <ops> <errors> <rss_growth_kb> <fd_growth>" (an error ends the run at once).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "chorus/chorus.hpp"
#include "runtime/core/half.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::testrank {
namespace {

using namespace std::chrono_literals;

struct test_tensor {
  int index = 0;
  std::string name;
  collective_kind kind = collective_kind::allreduce;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;  // allgather: [rows on rank 0 before the per-rank offset, cols]
  reduce_op op = reduce_op::sum;
  int root = -1;

  /// Allgather: rank r contributes rows(r) rows (0 included); the others agree on the shape.
  int64_t rows(int rank) const { return shape[0] + (rank + index) % 3; }
  std::vector<int64_t> shape_on(int rank) const {
    if (kind != collective_kind::allgather) return shape;
    return {rows(rank), shape[1]};
  }
  int64_t elements(int rank) const {
    int64_t n = 1;
    for (auto d : shape_on(rank)) n *= d;
    return n;
  }
};

std::vector<test_tensor> make_tensors(uint64_t seed, int size, int count) {
  std::mt19937_64 g(seed);
  std::vector<test_tensor> out;
  for (int i = 0; i < count; ++i) {
    test_tensor t;
    t.index = i;
    auto k = g() % 20;
    t.kind = k < 14 ? collective_kind::allreduce : k < 17 ? collective_kind::broadcast : collective_kind::allgather;
    t.type = static_cast<dtype>(g() % 9);  // every dtype but bool (which reduces as logic)
    // Log-uniform element counts 1 … 128 Ki; the first two above the default chunk size.
    int64_t n = i < 2 ? int64_t{1} << 21 : static_cast<int64_t>(std::exp2(static_cast<double>(g() % 1700) / 100.0));
    if (i < 2) t.type = dtype::f32, t.kind = collective_kind::allreduce;
    if (t.kind == collective_kind::allgather) {
      t.shape = {static_cast<int64_t>(g() % 40), 1 + static_cast<int64_t>(g() % 64)};
    } else if (g() % 2) {
      t.shape = {n};
    } else {
      int64_t a = 1 + static_cast<int64_t>(g() % 8);
      t.shape = {a, std::max<int64_t>(1, n / a)};
    }
    t.op = static_cast<reduce_op>(g() % arithmetic_reduce_op_count);
    if (t.kind == collective_kind::broadcast) t.root = static_cast<int>(g() % static_cast<uint64_t>(size));
    t.name = "t" + std::to_string(i) + "." + std::string(name_of(t.kind)) + "." + std::string(name_of(t.type));
    out.push_back(std::move(t));
  }
  return out;
}

void store(dtype t, void* base, int64_t i, double v) {
  switch (t) {
    case dtype::f16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(static_cast<float>(v));
      break;
    case dtype::bf16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(static_cast<float>(v));
      break;
    case dtype::f32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case dtype::f64:
      static_cast<double*>(base)[i] = v;
      break;
    case dtype::i32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case dtype::i64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case dtype::u8:
    case dtype::boolean:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
    case dtype::i8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
    case dtype::i16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v);
      break;
  }
}

double load(dtype t, const void* base, int64_t i) {
  switch (t) {
    case dtype::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case dtype::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case dtype::f32:
      return static_cast<const float*>(base)[i];
    case dtype::f64:
      return static_cast<const double*>(base)[i];
    case dtype::i32:
      return static_cast<const int32_t*>(base)[i];
    case dtype::i64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case dtype::u8:
    case dtype::boolean:
      return static_cast<const uint8_t*>(base)[i];
    case dtype::i8:
      return static_cast<const int8_t*>(base)[i];
    case dtype::i16:
      return static_cast<const int16_t*>(base)[i];
  }
  return 0;
}

/// Element j of rank `rank`'s input. Sums stay <= 28, products <= 16, all >= 0.
double input_value(const test_tensor& t, int step, int rank, int size, int64_t j) {
  int64_t k = t.index + step;
  if (t.kind == collective_kind::broadcast) return static_cast<double>((j * 3 + rank * 11 + k) % 97);
  if (t.kind == collective_kind::allgather) {
    int64_t row = j / t.shape[1], col = j % t.shape[1];
    return static_cast<double>((rank * 13 + row * 7 + col + k) % 50);
  }
  switch (t.op) {
    case reduce_op::sum:
      return static_cast<double>((j * 7 + k + rank * 3) % 8);
    case reduce_op::average: {
      int64_t base = (j * 5 + k) % 16 + 4;  // rank 0 gives base-(size-1), the others base+1
      return static_cast<double>(base + (rank == 0 ? -(size - 1) : 1));
    }
    case reduce_op::min:
    case reduce_op::max:
      return static_cast<double>((j * 3 + k + rank * 5) % 11);
    case reduce_op::product:
      return static_cast<double>(1 + (j + k + rank) % 2);
  }
  return 0;
}

double expected_value(const test_tensor& t, int step, int size, int64_t j) {
  if (t.kind == collective_kind::broadcast) return input_value(t, step, t.root, size, j);
  if (t.op == reduce_op::average) return static_cast<double>((j * 5 + t.index + step) % 16 + 4);
  double acc = input_value(t, step, 0, size, j);
  for (int r = 1; r < size; ++r) {
    double v = input_value(t, step, r, size, j);
    if (t.op == reduce_op::sum)
      acc += v;
    else if (t.op == reduce_op::min)
      acc = std::min(acc, v);
    else if (t.op == reduce_op::max)
      acc = std::max(acc, v);
    else
      acc *= v;
  }
  return acc;
}

std::string describe_bad(const test_tensor& t, int64_t j, double got, double want) {
  return "'" + t.name + "' (" + std::string(name_of(t.op)) + ") element " + std::to_string(j) + ": got " +
         std::to_string(got) + ", expected " + std::to_string(want);
}

std::string check_reduced(const test_tensor& t, int step, int rank, int size, const void* buf) {
  for (int64_t j = 0; j < t.elements(rank); ++j) {
    double got = load(t.type, buf, j), want = expected_value(t, step, size, j);
    if (got != want) return describe_bad(t, j, got, want);
  }
  return {};
}

std::string check_gathered(const test_tensor& t, int step, int size, const std::vector<std::byte>& g,
                           const std::vector<int64_t>& shape) {
  int64_t rows = 0;
  for (int r = 0; r < size; ++r) rows += t.rows(r);
  if (shape != std::vector<int64_t>{rows, t.shape[1]})
    return "'" + t.name + "' gathered shape " + format_shape(shape) + ", expected " + format_shape({rows, t.shape[1]});
  if (g.size() != static_cast<std::size_t>(rows * t.shape[1]) * size_of(t.type))
    return "'" + t.name + "' gathered " + std::to_string(g.size()) + " bytes";
  int64_t at = 0;
  for (int r = 0; r < size; ++r)
    for (int64_t j = 0; j < t.elements(r); ++j, ++at) {
      double got = load(t.type, g.data(), at), want = input_value(t, step, r, size, j);
      if (got != want) return describe_bad(t, at, got, want) + " (from rank " + std::to_string(r) + ")";
    }
  return {};
}

/// Resident memory (KiB) and open descriptors of this process, from /proc.
long rss_kb() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}
long open_fds() {
  long n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

int end_with(int code) {
  std::fflush(stdout);
  shutdown();
  return code;
}

int failed(const status& st) {
  std::printf("testrank error: %s\n", st.to_string().c_str());
  return end_with(3);
}

}  // namespace

namespace {

int run_exact(uint64_t seed, int steps, bool soak) {
  if (auto st = init(); !st.ok()) return failed(st);
  const int rank = chorus::rank(), size = chorus::size();
  uint64_t rank_seed = seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(rank + 1));
  std::printf("pipeline-exact seed=%llu rank=%d size=%d rank_seed=%llu steps=%d\n",
              static_cast<unsigned long long>(seed), rank, size, static_cast<unsigned long long>(rank_seed), steps);
  std::fflush(stdout);
  auto tensors = make_tensors(seed, size, 200);
  std::mt19937_64 rng(rank_seed);
  long rss0 = 0, fds0 = 0;

  for (int step = 0; step < steps; ++step) {
    auto deadline = std::chrono::steady_clock::now() + 100s;
    if (soak && step == 1) rss0 = rss_kb(), fds0 = open_fds();
    if (soak)  // one name in ten is new every step: the registry must not grow without end
      for (auto& t : tensors)
        if (t.index % 10 == 9) t.name = t.name.substr(0, t.name.find('#')) + "#" + std::to_string(step);
    std::vector<std::vector<std::byte>> bufs;
    for (auto& t : tensors) {
      bufs.emplace_back(static_cast<std::size_t>(t.elements(rank)) * size_of(t.type));
      for (int64_t j = 0; j < t.elements(rank); ++j)
        store(t.type, bufs.back().data(), j, input_value(t, step, rank, size, j));
    }
    std::vector<std::size_t> order(tensors.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);

    // A quarter of the allreduces use the callback form, the rest handles.
    auto by_callback = [&](std::size_t i) { return tensors[i].kind == collective_kind::allreduce && i % 4 == 0; };
    std::vector<handle> handles(tensors.size());
    std::vector<std::atomic<int>> calls(tensors.size());
    std::vector<status> cb_status(tensors.size());
    for (auto i : order) {
      auto u = rng() % 100;
      if (u >= 95)
        std::this_thread::sleep_for(std::chrono::microseconds(1000 + rng() % 3000));
      else if (u >= 70)
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      const auto& t = tensors[i];
      tensor_view v{bufs[i].data(), t.type, t.shape_on(rank)};
      if (by_callback(i)) {
        allreduce_async(t.name, v, t.op, [&, i](const status& st) {
          cb_status[i] = st;
          calls[i].fetch_add(1, std::memory_order_release);
        });
      } else if (t.kind == collective_kind::allreduce) {
        handles[i] = allreduce_async(t.name, v, t.op);
      } else if (t.kind == collective_kind::broadcast) {
        handles[i] = broadcast_async(t.name, v, t.root);
      } else {
        handles[i] = allgather_async(t.name, v);
      }
    }

    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = tensors[i];
      status st;
      if (by_callback(i)) {
        while (calls[i].load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(200us);
        if (calls[i].load(std::memory_order_acquire) == 0) {
          std::printf("testrank hang: '%s' never called back (step %d)\n", t.name.c_str(), step);
          return end_with(4);
        }
        st = cb_status[i];
      } else {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        st = handles[i].wait(std::max(left, 0ms));
        if (st.code() == errc::timeout) {
          std::printf("testrank hang: %s\n", st.to_string().c_str());
          return end_with(4);
        }
      }
      if (!st.ok()) return failed(st);
      std::string bad = t.kind == collective_kind::allgather
                            ? check_gathered(t, step, size, handles[i].gathered(), handles[i].shape())
                            : check_reduced(t, step, rank, size, bufs[i].data());
      if (!bad.empty()) {
        std::printf("pipeline-exact WRONG step %d: %s\n", step, bad.c_str());
        return end_with(1);
      }
    }
    for (auto& n : calls)
      if (n.load() > 1) {
        std::printf("pipeline-exact WRONG: a callback ran %d times\n", n.load());
        return end_with(1);
      }
    if (!soak || step % 50 == 0) std::printf("step %d exact\n", step);
    std::fflush(stdout);
  }
  std::printf("pipeline-exact: all exact, %zu tensors x %d steps on rank %d of %d\n", tensors.size(), steps, rank,
              size);
  if (soak)
    std::printf("RESULT soak %zu 0 %ld %ld\n", tensors.size() * static_cast<std::size_t>(steps),
                steps > 1 ? rss_kb() - rss0 : 0L, steps > 1 ? open_fds() - fds0 : 0L);
  return end_with(0);
}

}  // namespace

int run_pipeline_exact(int argc, char** argv) {
  uint64_t seed = argc >= 3 ? std::strtoull(argv[2], nullptr, 10) : std::random_device{}();
  int steps = argc >= 4 ? std::atoi(argv[3]) : 2;
  return run_exact(seed, steps, false);
}

int run_pipeline_soak(int argc, char** argv) {
  if (argc < 3) return 2;
  long ops = std::atol(argv[2]);
  uint64_t seed = argc >= 4 ? std::strtoull(argv[3], nullptr, 10) : std::random_device{}();
  return run_exact(seed, static_cast<int>(std::max(2L, (ops + 199) / 200)), true);
}

}  // namespace chorus::testrank
