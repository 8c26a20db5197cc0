// Splitting the benchmarks' comma-separated option values ("4K,64M", "none,fp16").
#pragma once

#include <string>
#include <vector>

namespace chorus::bench {

/// The items of `list` between commas, in order, empty ones included ("" is one empty item).
inline std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace chorus::bench
