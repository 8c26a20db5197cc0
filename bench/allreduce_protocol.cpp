// Timing loop, result check and RESULT formatting of the allreduce benchmark.
#include "bench/allreduce_protocol.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "bench/comma_list.hpp"

namespace chorus::bench {
namespace {

// Rank r's element i: small integers keep the float sum exact.
float input(int rank, int iteration, std::size_t i) {
  return static_cast<float>((i + static_cast<std::size_t>(rank) * 7 + static_cast<std::size_t>(iteration)) % 64);
}

void refill(float* data, std::size_t count, int rank, int iteration) {
  for (std::size_t i = 0; i < count; ++i) data[i] = input(rank, iteration, i);
}

void check(const allreduce_impl& impl, const float* data, std::size_t count, int iteration) {
  std::size_t stride = count > 4096 ? 4093 : 1;
  for (std::size_t i = 0; i < count; i += stride) {
    float want = 0;
    for (int r = 0; r < impl.size; ++r) want += input(r, iteration, i);
    if (data[i] != want) {
      char msg[256];
      std::snprintf(msg, sizeof msg, "%s: wrong result at element %zu of %zu: %g, expected %g", impl.name.c_str(), i,
                    count, static_cast<double>(data[i]), static_cast<double>(want));
      throw std::runtime_error(msg);
    }
  }
}

}  // namespace

size_result measure(const allreduce_impl& impl, float* buffer, std::size_t bytes) {
  std::size_t count = bytes / sizeof(float);
  int iterations = static_cast<int>(std::clamp<std::size_t>((512u << 20) / std::max<std::size_t>(bytes, 1), 5, 200));
  constexpr int warmups = 3;
  std::vector<double> times;
  for (int it = 0; it < warmups + iterations; ++it) {
    refill(buffer, count, impl.rank, it);
    impl.barrier();
    auto t0 = std::chrono::steady_clock::now();
    impl.allreduce_sum(buffer, count);
    auto t1 = std::chrono::steady_clock::now();
    check(impl, buffer, count, it);
    if (it >= warmups) times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  impl.allreduce_max(times.data(), times.size());
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  size_result r;
  r.bytes = bytes;
  r.iterations = iterations;
  std::size_t n = sorted.size();
  r.median_us = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  r.min_us = sorted.front();
  double factor = 2.0 * (impl.size - 1) / impl.size * static_cast<double>(bytes) / 1e9;
  r.busbw_gbps = factor / (r.median_us * 1e-6);
  r.busbw_at_min_gbps = factor / (r.min_us * 1e-6);
  return r;
}

std::string result_line(const allreduce_impl& impl, const size_result& r) {
  char line[256];
  std::snprintf(line, sizeof line, "RESULT %s %d %zu %d %.1f %.1f %.3f %.3f", impl.name.c_str(), impl.size, r.bytes,
                r.iterations, r.median_us, r.min_us, r.busbw_gbps, r.busbw_at_min_gbps);
  return line;
}

std::vector<std::size_t> parse_sizes(const std::string& list) {
  std::vector<std::size_t> out;
  for (std::string item : split_commas(list)) {
    if (item.empty()) continue;
    std::size_t mult = 1;
    char last = item.back();
    if (last == 'K' || last == 'k') mult = 1u << 10;
    if (last == 'M' || last == 'm') mult = 1u << 20;
    if (last == 'G' || last == 'g') mult = 1u << 30;
    if (mult != 1) item.pop_back();
    std::size_t pos = 0;
    unsigned long long v = std::stoull(item, &pos);
    if (pos != item.size()) throw std::invalid_argument("bad size '" + item + "'");
    out.push_back(static_cast<std::size_t>(v) * mult);
  }
  return out;
}

}  // namespace chorus::bench
