// The autotuner actor: one per rank when CHORUS_AUTOTUNE=1 (docs/autotune.md). It receives
// bucket_finished from completion and window_agreed from the negotiator; it sends
// window_scored to the negotiator and tunables_switch to fusion, the negotiator and senders.
//
// Protocol, per window:
//  1. The rank scores its own window: bytes of finished buckets / wall time, over
//     `steps_per_sample` training steps (runtime/tuning/window_meter.hpp: a step has passed
//     when a tensor finishes again). It submits the score, with its tuner's digest, to the
//     negotiator, and submits nothing more until that window is agreed (a window that ends
//     meanwhile waits, and the latest such one is submitted then).
//  2. The gossip agrees the window once every rank scored it: the minimum score, at the end
//     of cycle c, the same on every rank (a different digest is a protocol error there).
//  3. Every rank feeds that score to the same tuner (runtime/tuning/tuner.hpp, same seed) and
//     so computes the same next tunables; it tells fusion which tunables hold from the batch of
//     cycle c+1 on. Fusion holds such batches until it knows (tunables_pending), and never
//     touches a bucket planned before: its buffer and chunk plan stay as they were.
// There is no rank 0 and no broadcast: the agreement is on the scores, the rest is computed.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "actors/options.hpp"
#include "actors/protocol.hpp"
#include "runtime/tuning/knobs.hpp"
#include "runtime/tuning/tuner.hpp"
#include "runtime/tuning/window_meter.hpp"

namespace chorus {

struct autotuner_config {
  int rank = 0;
  int size = 1;
  tuning::tuner_options options;
  int max_streams = 1;             ///< connections opened to each peer (the streams axis' top)
  tuning::knob_values start;       ///< the configured tunables, where the search starts
  int steps_per_sample = 10;       ///< training steps per window (window_meter.hpp)
  std::string log_path;            ///< CHORUS_AUTOTUNE_LOG: CSV written by rank 0; empty = none
  bool held = false;               ///< start held (autotune_hold): scoring nothing until resumed
};

struct autotuner_state {
  autotuner_config cfg;
  autotuner_wiring wired;
  tuning::search_space space;
  std::optional<tuning::tuner> tuner;
  tuning::knob_values in_force;
  // the window being measured, and the score of one that ended while another was awaited
  std::optional<tuning::window_meter> meter;
  std::optional<double> ready;
  bool awaiting = false;  ///< a score was submitted and its window is not agreed yet
  bool held = false;      ///< autotune_hold: no scoring; in_force follows set_tunables
  uint64_t submitted = 0;  ///< windows submitted so far (real and padding)
  /// A hold in progress (autotune_hold, then autotune_pad): no real window is submitted; padding
  /// windows up to pad_to; then held once the last is agreed, and pad_reply answered.
  bool holding = false;
  uint64_t pad_to = 0;
  std::optional<caf::response_promise> pad_reply;
  std::unique_ptr<std::ofstream> log;
  static inline const char* name = "chorus.autotuner";
};

/// The configured tunables as the autotuner starts from them: the nearest point of its grid
/// (the pipeline configures fusion, negotiator and senders with these when autotuning).
tuning::knob_values autotune_start(const tuning::knob_values& configured, int max_streams);
/// The top of the streams axis: CHORUS_MAX_STREAMS, or all `streams` connections when 0.
int autotune_max_streams(const pipeline_options& opts, int streams);
/// With opts.autotune on, opts with its tunables snapped to the grid (every rank alike), so
/// that the first batches are planned as the tuner's first sample assumes; else opts.
pipeline_options with_autotune_start(pipeline_options opts, int streams);
/// The autotuner's settings from the pipeline's (CHORUS_AUTOTUNE_* through runtime/config).
autotuner_config autotuner_config_of(const pipeline_options& opts, int rank, int size, int streams);
/// The tunables a switch carries, and back.
tunables_switch switch_of(const tuning::knob_values& v, uint64_t cycle);
telemetry::tunables telemetry_of(const tuning::knob_values& v);

caf::behavior autotuner_actor(caf::stateful_actor<autotuner_state>* self, autotuner_config cfg);

}  // namespace chorus
