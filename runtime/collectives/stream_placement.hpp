// Where a chunk goes: the stream expected to finish it first, by each stream's observed rate and
// the bytes it already holds (queued and in flight). Pure functions, no clock: the stream board
// (stream_board.hpp) feeds them measured rates, tests feed them numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus {

/// One stream as placement sees it.
struct stream_view {
  double rate = 0;              ///< bytes per second the stream moved while busy (estimate, > 0)
  std::size_t outstanding = 0;  ///< bytes of chunks handed to it and not finished
  uint32_t passed_over = 0;     ///< placements since it last got a chunk while it held nothing
};

/// The index of the stream whose expected finish, (outstanding + bytes) / rate, is earliest;
/// ties go to the lowest index. `streams` must not be empty.
std::size_t pick_stream(const std::vector<stream_view>& streams, std::size_t bytes);

/// New estimate from the old one and a sample: an exponentially weighted moving average that
/// gives the sample `weight` (0 < weight <= 1).
double blend_rate(double old_rate, double sample, double weight);

/// Probing: a stream passed over `probe_after` times while idle (its estimate may be stale: it
/// was slow once and got nothing since) has its rate doubled, and raised to at least a quarter
/// of the fastest stream's (never above it), and its count reset; repeated, this sends it a
/// chunk again, whose end measures it afresh.
/// Returns how many streams were raised.
std::size_t age_idle_streams(std::vector<stream_view>& streams, uint32_t probe_after);

}  // namespace chorus
