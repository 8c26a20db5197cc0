// The recorder's per-thread record buffer (recorder.hpp), shared by its hot path (recorder.cpp)
// and its writer thread (recorder_writer.cpp). Internal to the recorder.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "telemetry/trace/recorder.hpp"

namespace chorus::telemetry::trace {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct recorder::thread_buffer {
  std::mutex mu;
  std::vector<std::byte> data;  // records, under mu
  uint64_t dropped = 0;         // under mu
  // The owning thread only:
  std::vector<std::byte> scratch;
  std::unordered_map<std::string, uint32_t, string_hash, std::equal_to<>> strings;
  // The writer thread only:
  std::vector<std::byte> spare;
};

}  // namespace chorus::telemetry::trace
