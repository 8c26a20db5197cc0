// Checks shared by chorus-testrank wire-shm and pipeline-wire-shm (wire_shm.cpp,
// pipeline_wire_shm.cpp): inputs fp16 would round, the uncompressed sum and the fp16 ring's.
#pragma once

#include <bit>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "runtime/collectives/ring_schedule.hpp"
#include "runtime/core/half.hpp"

namespace chorus::testrank {

inline constexpr std::size_t elements = 100003;  // one chunk (compressed or not), odd size

inline float fp16_round(float x) { return f16_to_f32(f32_to_f16(x)); }

/// Rank r's input: values in (-300, 300) with full float mantissas (fp16 keeps 11 bits).
inline std::vector<float> input_of(int r, std::size_t n, int salt) {
  std::mt19937_64 g(static_cast<uint64_t>(1000 * salt + r + 7));
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

/// The compressed ring's value for element i of block `first` (wire_ring_op.hpp: the block's
/// chain starts at its owner, partial sums travel in fp16, the result is fp16).
inline float ring_fp16(const std::vector<std::vector<float>>& in, int first, std::size_t i) {
  const int n = static_cast<int>(in.size());
  float w = fp16_round(in[static_cast<std::size_t>(first)][i]), a = w;
  for (int k = 1; k < n; ++k) {
    a = in[static_cast<std::size_t>((first + k) % n)][i] + w;
    if (k + 1 < n) w = fp16_round(a);
  }
  return fp16_round(a);
}

/// Checks an in-place fp16-asked sum of input salt `salt` in `got`; "" when as expected.
inline std::string check_sum(const std::vector<float>& got, int size, bool exact, int salt) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < size; ++r) in.push_back(input_of(r, got.size(), salt));
  std::size_t rounded_differs = 0;
  for (int blk = 0; blk < size; ++blk)
    for (std::size_t i = block_begin(got.size(), size, blk); i < block_begin(got.size(), size, blk + 1); ++i) {
      float plain = in[0][i];
      for (int r = 1; r < size; ++r) plain += in[static_cast<std::size_t>(r)][i];
      const float want = exact ? plain : ring_fp16(in, blk, i);
      if (!exact && want != plain) ++rounded_differs;
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want))
        return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
               std::to_string(want) + (exact ? " (the uncompressed sum)" : " (the fp16 ring)");
    }
  // The inputs must be ones fp16 rounds, or the test could not tell the two apart.
  if (!exact && rounded_differs < got.size() / 2)
    return "only " + std::to_string(rounded_differs) + " elements differ from the exact sum";
  return {};
}

inline int report(const std::string& mode, bool exact, const std::string& wrong) {
  if (!wrong.empty()) {
    std::printf("wire-shm WRONG (%s, %s): %s\n", mode.c_str(), exact ? "exact" : "rounded", wrong.c_str());
    std::fflush(stdout);
    return 1;
  }
  std::printf("wire-shm: %s %s passed\n", mode.c_str(), exact ? "exact" : "rounded");
  std::fflush(stdout);
  return 0;
}

inline bool parse_expect(int argc, char** argv, bool& exact) {
  if (argc < 3) return false;
  const std::string e = argv[2];
  exact = e == "exact";
  return exact || e == "rounded";
}

}  // namespace chorus::testrank
