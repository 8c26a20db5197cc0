// observer_slot: the swap protocol (observer_slot.hpp).
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

std::shared_ptr<observer> observer_slot::exchange(std::shared_ptr<observer> part) {
  std::lock_guard lk(exchange_mu_);
  if (part) {
    std::optional<tunables> t;
    std::optional<std::size_t> direct;
    {
      std::lock_guard tl(tunables_mu_);
      t = last_tunables_;
      direct = direct_path_;
    }
    if (direct) part->on_direct_path(*direct, clock::now());
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

void observer_slot::on_tunables(const tunables& t, time_point at) {
  {
    std::lock_guard lk(tunables_mu_);
    last_tunables_ = t;
  }
  forwarding_observer::on_tunables(t, at);
}
void observer_slot::on_direct_path(std::size_t max_bytes, time_point at) {
  {
    std::lock_guard lk(tunables_mu_);
    direct_path_ = max_bytes;
  }
  forwarding_observer::on_direct_path(max_bytes, at);
}

std::optional<tunables> observer_slot::last_tunables() const {
  std::lock_guard lk(tunables_mu_);
  return last_tunables_;
}

}  // namespace chorus::telemetry
