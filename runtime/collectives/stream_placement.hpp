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
  uint32_t backoff = 0;         ///< probes in a row that found it still slow (see age_idle_streams)
  bool guessed = false;         ///< `rate` is a probe's guess, not a measurement
};

/// The index of the stream whose expected finish, (outstanding + bytes) / rate, is earliest;
/// ties go to the lowest index. `streams` must not be empty.
std::size_t pick_stream(const std::vector<stream_view>& streams, std::size_t bytes);

/// New estimate from the old one and a sample: an exponentially weighted moving average that
/// gives the sample `weight` (0 < weight <= 1).
double blend_rate(double old_rate, double sample, double weight);

/// Probing: a stream passed over `probe_after` << `backoff` times while idle (its estimate may
/// be stale: it was slow once and got nothing since) has its rate doubled, and raised to at
/// least a quarter of the fastest stream's (never above it), marked `guessed`, and its count
/// reset; repeated, this sends it a chunk again, whose end measures it afresh (measured_rate).
/// Returns how many streams were raised.
std::size_t age_idle_streams(std::vector<stream_view>& streams, uint32_t probe_after);

/// A measured sample for `streams[i]`: blended into its rate (blend_rate, `weight`), or taking
/// its place where the rate was a probe's guess. A probe whose sample is still under half the
/// fastest other stream's rate doubles the stream's wait before the next probe (`backoff`, at
/// most `max_backoff`): a connection that stays slow is asked less and less often, since each
/// probe holds its chunk, and the peer's matching chunk, a slow connection's time. A sample at
/// or above that half clears the backoff.
void measured_rate(std::vector<stream_view>& streams, std::size_t i, double sample, double weight,
                   uint32_t max_backoff);

}  // namespace chorus
