// observer_slot: the swap protocol (observer_slot.hpp) and the forwarding methods.
//
// Why it is safe to destroy what exchange() returns, in the single total order of the
// seq_cst operations: a caller that loads the old pointer did so after its own increment of
// in_flight_, and before exchange() stored the new pointer; exchange() reads in_flight_ after
// that store, so it sees the increment until the caller's decrement, which follows the call.
// A caller that loads after the store sees the new pointer and never touches the old part.
#include "telemetry/observer_slot.hpp"

#include <thread>
#include <utility>

namespace chorus::telemetry {

template <class F>
void observer_slot::forward(F&& f) {
  // Fast path: nothing installed, one relaxed load (a part installed a moment ago is picked up
  // by the next event).
  if (!current_.load(std::memory_order_relaxed)) return;
  in_flight_.fetch_add(1, std::memory_order_seq_cst);
  if (observer* p = current_.load(std::memory_order_seq_cst)) f(*p);
  in_flight_.fetch_sub(1, std::memory_order_release);
}

std::shared_ptr<observer> observer_slot::exchange(std::shared_ptr<observer> part) {
  std::lock_guard lk(exchange_mu_);
  if (part) {
    std::optional<tunables> t;
    {
      std::lock_guard tl(tunables_mu_);
      t = last_tunables_;
    }
    if (t) part->on_tunables(*t, clock::now());
  }
  current_.store(part.get(), std::memory_order_seq_cst);
  // Drain: every call that may still hold the old pointer ends before we hand it back. A call
  // into the new part may keep the count up for a moment too; each is short (observer calls
  // never block), so the count reaches zero between events.
  while (in_flight_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  std::swap(owner_, part);
  return part;
}

void observer_slot::on_enqueue(uint64_t h, const tensor_spec& s, time_point at) {
  forward([&](observer& p) { p.on_enqueue(h, s, at); });
}
void observer_slot::on_callback(uint64_t h, const tensor_spec& s, const status& r, time_point e, time_point at) {
  forward([&](observer& p) { p.on_callback(h, s, r, e, at); });
}
void observer_slot::on_ready(uint64_t h, const tensor_spec& s, uint64_t cycle, time_point at) {
  forward([&](observer& p) { p.on_ready(h, s, cycle, at); });
}
void observer_slot::on_gossip_sent(int to, std::span<const uint8_t> b, time_point at) {
  forward([&](observer& p) { p.on_gossip_sent(to, b, at); });
}
void observer_slot::on_gossip_received(std::span<const uint8_t> b, time_point at) {
  forward([&](observer& p) { p.on_gossip_received(b, at); });
}
void observer_slot::on_cycle(const cycle_event& c) {
  forward([&](observer& p) { p.on_cycle(c); });
}
void observer_slot::on_agreed(uint64_t cycle, std::span<const std::string> n,
                              std::span<const std::chrono::microseconds> l, time_point at) {
  forward([&](observer& p) { p.on_agreed(cycle, n, l, at); });
}
void observer_slot::on_stall(const std::string& name, std::span<const int> missing, time_point at) {
  forward([&](observer& p) { p.on_stall(name, missing, at); });
}
void observer_slot::on_bucket(const bucket_event& b, time_point at) {
  forward([&](observer& p) { p.on_bucket(b, at); });
}
void observer_slot::on_chunk_start(int stream, uint64_t seq, std::size_t bytes, time_point at) {
  forward([&](observer& p) { p.on_chunk_start(stream, seq, bytes, at); });
}
void observer_slot::on_chunk_end(int stream, uint64_t seq, std::size_t bytes, const status& r, time_point started,
                                 time_point at) {
  forward([&](observer& p) { p.on_chunk_end(stream, seq, bytes, r, started, at); });
}
void observer_slot::on_steal(int thief, int victim, uint64_t seq, time_point at) {
  forward([&](observer& p) { p.on_steal(thief, victim, seq, at); });
}
void observer_slot::on_error(std::string_view kind, const status& e, time_point at) {
  forward([&](observer& p) { p.on_error(kind, e, at); });
}
void observer_slot::on_nonfinite(std::span<const std::string> t, std::span<const int> r, std::string_view m,
                                 time_point at) {
  forward([&](observer& p) { p.on_nonfinite(t, r, m, at); });
}
void observer_slot::on_compressed(int stream, std::size_t raw, std::size_t wire, time_point at) {
  forward([&](observer& p) { p.on_compressed(stream, raw, wire, at); });
}
void observer_slot::on_tunables(const tunables& t, time_point at) {
  {
    std::lock_guard lk(tunables_mu_);
    last_tunables_ = t;
  }
  forward([&](observer& p) { p.on_tunables(t, at); });
}
std::optional<tunables> observer_slot::last_tunables() const {
  std::lock_guard lk(tunables_mu_);
  return last_tunables_;
}
void observer_slot::on_autotune(const autotune_event& e, time_point at) {
  forward([&](observer& p) { p.on_autotune(e, at); });
}

}  // namespace chorus::telemetry
