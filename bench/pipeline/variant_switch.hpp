// The benchmark's telemetry switch: the pipeline runs with this one observer for its whole
// life, and each step selects which variant's observer (none for the plain pipeline) receives
// the events. Steps of the variants interleave in one run, so they share the machine's noise.
// Cost while nothing is selected: one atomic load per event. While a variant is selected, the
// switch also times each of its calls (two clock reads around it), so the bench can report the
// observer's own time on the actors' threads, which the machine's noise cannot hide.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "telemetry/observer.hpp"

namespace chorus::bench {

class variant_switch final : public telemetry::forwarding_observer<variant_switch> {
 public:
  /// Events from now on go to `o` (nullptr: nowhere). `o` must outlive its selection.
  void select(telemetry::observer* o) { target_.store(o, std::memory_order_release); }

  /// Time spent inside the selected observer and calls made since the last take().
  struct usage {
    std::chrono::nanoseconds busy{0};
    uint64_t calls = 0;
  };
  usage take() {
    return {std::chrono::nanoseconds(busy_ns_.exchange(0)), calls_.exchange(0)};
  }

 private:
  friend class telemetry::forwarding_observer<variant_switch>;
  template <class Call>
  void forward(Call&& call) {
    auto* o = target_.load(std::memory_order_acquire);
    if (!o) return;
    auto t0 = std::chrono::steady_clock::now();
    call(*o);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
    busy_ns_.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<telemetry::observer*> target_{nullptr};
  std::atomic<uint64_t> busy_ns_{0};
  std::atomic<uint64_t> calls_{0};
};

}  // namespace chorus::bench
