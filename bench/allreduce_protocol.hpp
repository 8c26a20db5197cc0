// The measurement protocol of `chorus-bench allreduce`, shared by every implementation:
// float32 in place; 3 warm-ups, then clamp(512 MiB / bytes, 5, 200) timed iterations, each
// preceded by an untimed refill and a barrier; an iteration's time is the max over ranks;
// busbw = 2(N-1)/N * bytes / time (GB = 1e9 B); every result is checked.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace chorus::bench {

/// One implementation under test, as blocking calls.
struct allreduce_impl {
  std::string name;  ///< first word of the RESULT line, e.g. "chorus_tcp"
  int rank = 0;
  int size = 1;
  std::function<void(float* data, std::size_t count)> allreduce_sum;
  std::function<void()> barrier;
  std::function<void(double* data, std::size_t count)> allreduce_max;
};

struct size_result {
  std::size_t bytes = 0;
  int iterations = 0;
  double median_us = 0;
  double min_us = 0;
  double busbw_gbps = 0;
  double busbw_at_min_gbps = 0;
};

/// Runs the protocol for `bytes` on `buffer` (pre-touched, at least bytes long). Throws
/// std::runtime_error naming the element when a result is wrong.
size_result measure(const allreduce_impl& impl, float* buffer, std::size_t bytes);

/// "RESULT <name> <N> <bytes> <iters> <median_us> <min_us> <busbw_GBps> <busbw_at_min_GBps>"
std::string result_line(const allreduce_impl& impl, const size_result& r);

/// Parses "4K,64K,1M,16M,64M" (suffixes K, M, G are powers of 1024).
std::vector<std::size_t> parse_sizes(const std::string& list);

}  // namespace chorus::bench
