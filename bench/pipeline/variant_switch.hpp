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

class variant_switch final : public telemetry::observer {
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

  void on_enqueue(uint64_t h, const tensor_spec& s, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_enqueue(h, s, at); });
  }
  void on_callback(uint64_t h, const tensor_spec& s, const status& r, telemetry::time_point e,
                   telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_callback(h, s, r, e, at); });
  }
  void on_ready(uint64_t h, const tensor_spec& s, uint64_t cycle, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_ready(h, s, cycle, at); });
  }
  void on_gossip_sent(int to, std::span<const uint8_t> b, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_gossip_sent(to, b, at); });
  }
  void on_gossip_received(std::span<const uint8_t> b, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_gossip_received(b, at); });
  }
  void on_cycle(const telemetry::cycle_event& c) override {
    forward([&](telemetry::observer& o) { o.on_cycle(c); });
  }
  void on_agreed(uint64_t cycle, std::span<const std::string> n, std::span<const std::chrono::microseconds> l,
                 telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_agreed(cycle, n, l, at); });
  }
  void on_stall(const std::string& name, std::span<const int> missing, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_stall(name, missing, at); });
  }
  void on_bucket(const telemetry::bucket_event& b, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_bucket(b, at); });
  }
  void on_chunk_start(int stream, uint64_t seq, std::size_t bytes, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_chunk_start(stream, seq, bytes, at); });
  }
  void on_chunk_end(int stream, uint64_t seq, std::size_t bytes, const status& r, telemetry::time_point started,
                    telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_chunk_end(stream, seq, bytes, r, started, at); });
  }
  void on_steal(int thief, int victim, uint64_t seq, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_steal(thief, victim, seq, at); });
  }
  void on_error(std::string_view kind, const status& e, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_error(kind, e, at); });
  }
  void on_tunables(const telemetry::tunables& t, telemetry::time_point at) override {
    forward([&](telemetry::observer& o) { o.on_tunables(t, at); });
  }

 private:
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
