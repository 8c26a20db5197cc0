// observer_slot: an observer whose one part can be installed, swapped or removed while the
// actors report to it (hvd.start_timeline / stop_timeline install and remove a trace recorder
// at run time). The session fans it out next to the observer the environment asked for, so
// the two never fight: CHORUS_TRACE's recorder stays on whatever the slot holds.
//
// Hot path: with nothing installed an event costs one relaxed load of a pointer. With a part
// installed it costs two atomic adds on one counter around the forwarded call; exchange()
// clears the pointer and then waits until that counter drains, so the part it returns is no
// longer in use by any actor and may be destroyed (its file flushed and closed).
// Thread-safety: every observer method may run on any thread at once, and concurrently with
// exchange(); exchange() calls are serialized among themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "telemetry/observer.hpp"

namespace chorus::telemetry {

class observer_slot final : public observer {
 public:
  /// Installs `part` (null: none) and returns the previous part once no event is being
  /// forwarded to it any more. A new part first gets the last on_tunables seen (the pipeline
  /// reports them once at start), so a recording started late still knows them.
  /// Must not be called from inside an observer method (it would wait for itself).
  std::shared_ptr<observer> exchange(std::shared_ptr<observer> part);
  /// Whether a part is installed (a hint: another thread may be exchanging it).
  bool installed() const { return current_.load(std::memory_order_relaxed) != nullptr; }
  /// The last on_tunables seen: the settings in force (the autotuner moves them).
  std::optional<tunables> last_tunables() const;

  void on_enqueue(uint64_t handle, const tensor_spec& spec, time_point at) override;
  void on_callback(uint64_t handle, const tensor_spec& spec, const status& result, time_point enqueued,
                   time_point at) override;
  void on_ready(uint64_t handle, const tensor_spec& spec, uint64_t cycle, time_point at) override;
  void on_gossip_sent(int to, std::span<const uint8_t> bytes, time_point at) override;
  void on_gossip_received(std::span<const uint8_t> bytes, time_point at) override;
  void on_cycle(const cycle_event& c) override;
  void on_agreed(uint64_t cycle, std::span<const std::string> names,
                 std::span<const std::chrono::microseconds> latencies, time_point at) override;
  void on_stall(const std::string& name, std::span<const int> missing_ranks, time_point at) override;
  void on_bucket(const bucket_event& b, time_point at) override;
  void on_chunk_start(int stream, uint64_t sequence, std::size_t bytes, time_point at) override;
  void on_chunk_end(int stream, uint64_t sequence, std::size_t bytes, const status& result, time_point started,
                    time_point at) override;
  void on_steal(int thief, int victim, uint64_t sequence, time_point at) override;
  void on_error(std::string_view kind, const status& error, time_point at) override;
  void on_nonfinite(std::span<const std::string> tensors, std::span<const int> ranks, std::string_view mode,
                    time_point at) override;
  void on_compressed(int stream, std::size_t raw_bytes, std::size_t wire_bytes, time_point at) override;
  void on_tunables(const tunables& t, time_point at) override;
  void on_autotune(const autotune_event& e, time_point at) override;

 private:
  /// Calls f(part) on the installed part, if any, keeping it alive for exchange() to see.
  template <class F>
  void forward(F&& f);

  std::atomic<observer*> current_{nullptr};
  std::atomic<uint64_t> in_flight_{0};  // forwarded calls running now
  std::mutex exchange_mu_;              // serializes exchange(); guards owner_
  std::shared_ptr<observer> owner_;     // keeps *current_ alive
  mutable std::mutex tunables_mu_;      // guards last_tunables_
  std::optional<tunables> last_tunables_;
};

}  // namespace chorus::telemetry
