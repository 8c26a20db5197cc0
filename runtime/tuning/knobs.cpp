// The tunables' axes and their mapping to points; the autotune log's rows.
#include "runtime/tuning/knobs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/config/variables.hpp"

namespace chorus::tuning {

result<search_space> knob_space(int max_streams) {
  if (max_streams < 1)
    return status{errc::invalid_argument, "autotune: max streams " + std::to_string(max_streams) + " < 1"};
  constexpr double KiB = 1024, MiB = 1024 * KiB;
  return search_space::make({
      axis::log_integers("streams", 1, max_streams, std::min(max_streams, 8)),
      axis::powers_of_two("chunk_bytes", 64 * KiB, 16 * MiB),
      axis::powers_of_two("fusion_threshold", 1 * MiB, 256 * MiB),
      axis::log_spaced("cycle_time_ms", 0.125, 8, 7),
      axis::powers_of_two("in_place_bytes", 128 * KiB, 64 * MiB),
  });
}

point to_point(const search_space& space, const knob_values& v) {
  return space.nearest({double(v.streams), double(v.chunk_bytes), double(v.fusion_threshold),
                        double(v.cycle_time.count()) / 1000.0, double(v.in_place_bytes)});
}

knob_values from_point(const search_space& space, const point& p) {
  auto x = space.values(p);
  knob_values v;
  v.streams = static_cast<int>(std::lround(x[0]));
  v.chunk_bytes = static_cast<std::size_t>(std::llround(x[1]));
  v.fusion_threshold = static_cast<std::size_t>(std::llround(x[2]));
  v.cycle_time = std::chrono::microseconds(std::llround(x[3] * 1000.0));
  v.in_place_bytes = static_cast<std::size_t>(std::llround(x[4]));
  return v;
}

uint64_t digest_of(const knob_values& v) {
  uint64_t h = mix64(static_cast<uint64_t>(v.streams));
  h = mix64(h ^ v.chunk_bytes);
  h = mix64(h ^ v.fusion_threshold);
  h = mix64(h ^ static_cast<uint64_t>(v.cycle_time.count()));
  return mix64(h ^ v.in_place_bytes);
}

std::string describe(const knob_values& v) {
  return "streams=" + std::to_string(v.streams) + " chunk_bytes=" + std::to_string(v.chunk_bytes) +
         " fusion_threshold=" + std::to_string(v.fusion_threshold) +
         " cycle_time_ms=" + cfg::number_text(double(v.cycle_time.count()) / 1000.0) +
         " in_place_bytes=" + std::to_string(v.in_place_bytes);
}

std::string csv_header() {
  return "sample,search,phase,cycle,streams,chunk_bytes,fusion_threshold,cycle_time_ms,in_place_bytes,score_bytes_per_s";
}

std::string csv_row(const sample_record& s, const knob_values& v, uint64_t cycle) {
  char score[64];
  std::snprintf(score, sizeof score, "%.6g", s.score);
  return std::to_string(s.index) + "," + std::to_string(s.search) + "," +
         (s.phase == tuner_phase::searching ? "search" : "watch") + "," + std::to_string(cycle) + "," +
         std::to_string(v.streams) + "," + std::to_string(v.chunk_bytes) + "," + std::to_string(v.fusion_threshold) +
         "," + cfg::number_text(double(v.cycle_time.count()) / 1000.0) + "," + std::to_string(v.in_place_bytes) + "," +
         score;
}

}  // namespace chorus::tuning
