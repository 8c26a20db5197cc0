// The autotuner's sequencing, as a pure state machine fed one agreed window score at a time
// (autotuner actor -> tuner): windows after a switch are dropped while the new setting
// settles; a sample is the median of several windows; samples drive the Bayesian search until
// it stops; then the tuner watches. When the score stays more than a threshold below the
// converged level for several windows (the network changed), it searches again, first
// sampling the best points it knows and the stream counts and chunk sizes next to the ones in
// force, with a smaller budget. Before settling, a search samples its best points again (the
// first search first samples the chunk sizes next to its best point), and a search started
// by a drop its first point too: when that moved, the network changed during the search, which
// then starts once more. Equal inputs, equal outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tuning/bayes_optimizer.hpp"

namespace chorus::tuning {

struct tuner_options {
  optimizer_options search;       ///< the first search (seed, warm-up, budget, noise)
  int windows_per_sample = 3;     ///< a sample is the median of this many windows
  int settle_windows = 1;         ///< windows ignored after each switch (mixed old and new work)
  double drop_threshold = 0.15;   ///< search again when the score is below (1 - this) * converged
  int drop_windows = 3;           ///< ... for this many windows in a row
  int retune_samples = 10;        ///< budget of a search started by a drop
  int retune_starts = 2;          ///< best known points a new search samples first (the one in force among them)
  /// A new search also samples the point in force with its stream count moved by 1 .. this many
  /// steps of the streams axis (axis 0) either way, the other knobs kept: a network change that
  /// slows some connections moves the best stream count most. 0: none.
  int retune_stream_steps = 1;
  /// ... and with its chunk size moved by 1 .. this many steps of the chunk axis (axis 1, powers
  /// of two) either way: slow connections leave a tail of large chunks that smaller ones let the
  /// fast streams take, and a faster network favours larger ones. 0: none.
  int retune_chunk_steps = 1;
  /// Axes a search started by a drop keeps at their values in force: a network change moves the
  /// knobs that shape the traffic (streams, chunk and fusion sizes), not those that follow the
  /// compute (cycle time and in-place threshold, axes 3 and 4 of knobs.hpp's space). The smaller
  /// space lets retune_samples find the new best instead of wandering. Empty: every axis free.
  std::vector<std::size_t> retune_pinned_axes = {3, 4};
  /// A search started by a drop samples its first point (the one in force at the drop) again
  /// before settling. When the two samples differ by more than drop_threshold, the network
  /// changed during the search and the fit mixes two networks: search again, once, without
  /// those samples. (The first point is not chosen for a high score, so a lucky first sample of
  /// the best points does not look like a change.)
  bool restart_on_drift = true;
  /// A search started by a drop first samples the point in force; when that sample is not below
  /// the drop level after all (a few slow windows: load, not the network), the tuner goes back
  /// to watching with what it knew, and the search ends after that one sample.
  bool confirm_drop = true;
  /// When a search stops, its best points by posterior mean are sampled once more before the
  /// tuner settles on one: one lucky sample of a noisy window must not decide. 0: settle at once.
  int confirm_points = 2;
  /// ... and so is the point of the best single sample, when the fit does not rank it among
  /// them: the fit smooths a narrow peak (a chunk size, an in-place threshold) into its slower
  /// neighbours, and only a second sample tells such a peak from a lucky window. The first
  /// search's budget leaves room for it.
  bool confirm_raw_best = true;
  /// When a search stops, before that confirmation, it samples the chunk sizes 1 .. this many
  /// steps of the chunk axis (axis 1) either way of its best point by posterior mean, the other
  /// knobs kept. The best chunk size is a narrow peak (a tail of large chunks on slow
  /// connections one side, per-chunk costs the other), and a search that reached the best point's
  /// region late may have sampled its chunk neighbours only with other settings of the other
  /// knobs; a search started by a drop sampled the chunk neighbours of the point in force, not of
  /// the point it found. The first search's budget leaves room for these samples; a search
  /// started by a drop takes them after its retune_samples. 0: none.
  int confirm_chunk_steps = 1;
};

enum class tuner_phase : uint8_t { searching = 0, watching = 1 };

/// A finished sample: the point in force, the median of its windows.
struct sample_record {
  uint64_t index = 0;  ///< 1, 2, ... over the tuner's life
  point at;
  double score = 0;
  tuner_phase phase = tuner_phase::searching;
  uint32_t search = 0;  ///< 0 for the first search, then 1, 2, ... per re-search
};

/// What one window led to.
struct tuner_step {
  std::optional<sample_record> sample;  ///< a sample ended with this window
  std::optional<point> switch_to;       ///< apply this point (differs from the one in force)
  bool converged = false;               ///< the search stopped with this window
  bool searching_again = false;         ///< a drop started a new search with this window
};

class tuner {
 public:
  tuner(search_space space, tuner_options options, point start);

  tuner_step on_window(double score);

  const point& current() const { return current_; }
  tuner_phase phase() const { return phase_; }
  uint64_t samples() const { return samples_; }
  uint32_t searches() const { return search_; }
  const bayes_optimizer& optimizer() const { return opt_; }
  const search_space& space() const { return opt_.space(); }
  /// A digest of everything that decides the next proposal (the point in force, phase,
  /// counters and every sample): ranks that agree on it make the same next move.
  uint64_t digest() const { return digest_; }

 private:
  void switch_to(point p, tuner_step& out);
  /// Switches to the first point of `queue` and removes it; false when `queue` is empty.
  bool switch_to_next(std::vector<point>& queue, tuner_step& out);
  void search_again(tuner_step& out);
  bool drifted() const;
  point settle_on() const;
  void fold(uint64_t v) { digest_ = mix64(digest_ ^ v); }

  tuner_options options_;
  bayes_optimizer opt_;
  point current_;
  tuner_phase phase_ = tuner_phase::searching;
  std::vector<double> windows_;
  bool confirming_ = false;    // the search stopped; its best points are sampled again
  std::vector<point> probe_;   // ... first, the chunk sizes next to its best point
  bool confirm_planned_ = false;  // ... then confirm_ is drawn up from the fit that includes them
  std::vector<point> confirm_;  // ... these, in this order, still to sample
  std::vector<point> confirmed_;  // every point sampled again (the tuner settles on one of them)
  std::optional<point> anchor_;   // a search started by a drop: its first point, sampled again
  bool drift_restarted_ = false;  // this search was started by a drift (no second one in a row)
  int settle_left_ = 0;
  uint64_t samples_ = 0;
  uint32_t search_ = 0;
  std::optional<double> baseline_;  // converged level (watching)
  std::optional<double> settled_score_;  // the settled point's last sample in the search
  struct watched {  // what the tuner knew while watching, kept until a drop is confirmed
    bayes_optimizer opt;
    double baseline;
  };
  std::optional<watched> before_drop_;
  int low_ = 0;                     // consecutive windows below the threshold
  uint64_t digest_ = 0;
};

/// The median of `v` (mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> v);

}  // namespace chorus::tuning
