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

class observer_slot final : public forwarding_observer<observer_slot> {
 public:
  /// Installs `part` (null: none) and returns the previous part once no event is being
  /// forwarded to it any more. A new part first gets the last on_direct_path and on_tunables
  /// seen (the pipeline reports them at start), so a recording started late still knows them
  /// (a trace's replay plans with both).
  /// Must not be called from inside an observer method (it would wait for itself).
  std::shared_ptr<observer> exchange(std::shared_ptr<observer> part);
  /// Whether a part is installed (a hint: another thread may be exchanging it).
  bool installed() const { return current_.load(std::memory_order_relaxed) != nullptr; }
  /// The last on_tunables seen: the settings in force (the autotuner moves them).
  std::optional<tunables> last_tunables() const;

  /// Records `t` as the last tunables seen, then forwards it.
  void on_tunables(const tunables& t, time_point at) override;
  /// Records the direct path's size, then forwards it.
  void on_direct_path(std::size_t max_bytes, time_point at) override;

 private:
  friend class forwarding_observer<observer_slot>;
  /// Calls call(part) on the installed part, if any, keeping it alive for exchange() to see.
  template <class Call>
  void forward(Call&& call);

  std::atomic<observer*> current_{nullptr};
  std::atomic<uint64_t> in_flight_{0};  // forwarded calls running now
  std::mutex exchange_mu_;              // serializes exchange(); guards owner_
  std::shared_ptr<observer> owner_;     // keeps *current_ alive
  mutable std::mutex tunables_mu_;      // guards last_tunables_ and direct_path_
  std::optional<tunables> last_tunables_;
  std::optional<std::size_t> direct_path_;
};

// Fast path: nothing installed, one relaxed load (a part installed a moment ago is picked up by
// the next event). Why the protocol is safe: observer_slot.cpp.
template <class Call>
void observer_slot::forward(Call&& call) {
  if (!current_.load(std::memory_order_relaxed)) return;
  in_flight_.fetch_add(1, std::memory_order_seq_cst);
  if (observer* p = current_.load(std::memory_order_seq_cst)) call(*p);
  in_flight_.fetch_sub(1, std::memory_order_release);
}

}  // namespace chorus::telemetry
