// live_timeline: a timeline started and stopped while the job runs (hvd.start_timeline /
// stop_timeline). It records with a trace recorder (recorder.hpp) into a scratch file next to
// the output, `<path>.chorus-trace/rank-<r>.trace`; finish() closes the recorder, turns the
// recording into Chrome-trace JSON at `<path>` with the same conversion as `chorus-trace
// timeline` (timeline.hpp) and removes the scratch file.
//
// Who feeds it: the caller installs observer() in an observer_slot and exchanges it out again
// before finish(). Thread-safety: start() and finish() are for one thread at a time; the
// observer itself takes events from any thread (recorder.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/status.hpp"
#include "telemetry/observer.hpp"
#include "telemetry/trace/recorder.hpp"

namespace chorus::telemetry::trace {

struct live_timeline_options {
  std::string path;                         ///< the Chrome-trace JSON finish() writes
  bool mark_cycles = false;                 ///< a CYCLE_START instant per negotiation cycle
  int rank = 0;
  int size = 1;
  uint64_t max_bytes = default_max_mb << 20;  ///< bound of the scratch recording (0 = none)
};

class live_timeline {
 public:
  /// Creates `path` (empty until finish(); an error naming it when it cannot be created) and
  /// starts recording into the scratch file.
  static result<std::unique_ptr<live_timeline>> start(const live_timeline_options& options);
  /// Without finish(): closes the recorder and removes the scratch file; writes no JSON.
  ~live_timeline();
  live_timeline(const live_timeline&) = delete;
  live_timeline& operator=(const live_timeline&) = delete;

  /// What to install in the observer slot (the recorder).
  std::shared_ptr<observer> events() const { return recorder_; }
  const std::string& path() const { return opts_.path; }

  /// Call once the observer is no longer installed: closes the recording, writes the JSON to
  /// path() (through a temporary file, renamed into place) and removes the scratch file.
  /// Errors name the path. A second call does nothing.
  status finish();

 private:
  explicit live_timeline(live_timeline_options options) : opts_(std::move(options)) {}
  /// Closes the recorder and returns its file's path ("" when already closed).
  std::string close_recording();
  void remove_scratch(const std::string& file);

  live_timeline_options opts_;
  std::string scratch_dir_;
  std::shared_ptr<recorder> recorder_;
};

}  // namespace chorus::telemetry::trace
