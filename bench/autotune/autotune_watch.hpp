// The autotune benchmark's window on a pipeline: the tunables in force (on_tunables: the
// pipeline's start, set_tunables, the autotuner's switches) and the autotuner's progress
// (on_autotune: samples taken, whether it converged). Read from the benchmark's thread while
// the actors write: every member is behind one mutex. Nothing else is observed.
#pragma once

#include <cstdint>
#include <mutex>

#include "telemetry/observer.hpp"

namespace chorus::bench {

class autotune_watch final : public telemetry::observer {
 public:
  struct view {
    telemetry::tunables in_force;
    uint64_t samples = 0;    ///< samples the autotuner finished
    uint64_t switches = 0;   ///< on_tunables seen (the start counts)
    bool watching = false;   ///< converged, watching for a drop
  };
  view now() const {
    std::lock_guard lk(mu_);
    return v_;
  }

  void on_tunables(const telemetry::tunables& t, telemetry::time_point) override {
    std::lock_guard lk(mu_);
    v_.in_force = t;
    ++v_.switches;
  }
  void on_autotune(const telemetry::autotune_event& e, telemetry::time_point) override {
    std::lock_guard lk(mu_);
    if (e.sample) v_.samples = e.sample_index;
    v_.watching = e.watching;
  }

 private:
  mutable std::mutex mu_;
  view v_;
};

}  // namespace chorus::bench
