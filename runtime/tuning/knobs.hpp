// Chorus' tunables as a point of the autotuner's search space: streams used per peer, chunk
// size, fusion threshold, cycle time and in-place threshold, each on a log-scaled axis of a
// few values, and the autotune log's CSV row (CHORUS_AUTOTUNE_LOG, Horovod's format: one row
// per sample, the parameters and the score).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/config/defaults.hpp"
#include "runtime/tuning/search_space.hpp"
#include "runtime/tuning/tuner.hpp"

namespace chorus::tuning {

/// The values of the tunables; equal on every rank at every cycle.
struct knob_values {
  int streams = 8;                          ///< senders (streams per peer) that get chunks
  std::size_t chunk_bytes = default_chunk_bytes;
  std::size_t fusion_threshold = default_fusion_threshold;
  std::chrono::microseconds cycle_time{1000};
  std::size_t in_place_bytes = 1u << 20;
  bool operator==(const knob_values&) const = default;
};

/// Axes, in this order: streams (1 .. max_streams), chunk_bytes (64 KiB .. 16 MiB), fusion
/// threshold (1 MiB .. 256 MiB), cycle time (0.125 .. 8 ms), in-place threshold (128 KiB ..
/// 64 MiB); powers of two, streams all whole numbers up to 8 then log-spaced.
/// errc::invalid_argument when max_streams < 1.
result<search_space> knob_space(int max_streams);
/// The point nearest to `v` (values off the grid snap to the nearest on a log scale).
point to_point(const search_space& space, const knob_values& v);
knob_values from_point(const search_space& space, const point& p);
/// A digest of `v` (mixed into the tuner's digest when a switch is agreed).
uint64_t digest_of(const knob_values& v);
/// "streams=4 chunk_bytes=1048576 fusion_threshold=... cycle_time_ms=1 in_place_bytes=..."
std::string describe(const knob_values& v);

/// The autotune log: the header line and one row per sample.
std::string csv_header();
std::string csv_row(const sample_record& s, const knob_values& v, uint64_t cycle);

}  // namespace chorus::tuning
