// One observer for every ordered group of the process, and the data plane whose counters it reads.
#include "bindings/ordered/group_telemetry.hpp"

#include <mutex>

#include "telemetry/setup.hpp"

namespace chorus::ordered {

namespace {

struct hub {
  std::mutex mu;
  std::weak_ptr<telemetry::observer> observer;
  communicator* source = nullptr;  // the counters' data plane; null once it closed
};

hub& the_hub() {
  static auto* h = new hub();  // leaked: outlives every group, whatever the order of teardown
  return *h;
}

template <class F>
auto read_source(F f) {
  auto& h = the_hub();
  std::lock_guard lk(h.mu);
  using R = decltype(f(*h.source));
  return h.source ? f(*h.source) : R{};
}

}  // namespace

std::shared_ptr<telemetry::observer> acquire_telemetry(communicator& first, const config& cfg) {
  auto& h = the_hub();
  // One maker at a time; h.mu is not held while the observer is made (its parts read the
  // counters through h.mu).
  static std::mutex making;
  std::lock_guard made_lk(making);
  {
    std::lock_guard lk(h.mu);
    if (auto o = h.observer.lock()) return o;
    h.source = &first;
  }
  telemetry::context ctx;
  ctx.rank = first.rank();
  ctx.size = first.size();
  ctx.local_rank = first.hosts().local_of.empty() ? 0 : first.hosts().local_of[static_cast<std::size_t>(first.rank())];
  ctx.streams = first.num_streams();
  ctx.trace_prefix = "c10d-rank-";
  ctx.traffic = [](int s) { return read_source([s](communicator& c) { return c.plane().traffic(s); }); };
  ctx.peer_traffic = [](int s, int p) { return read_source([s, p](communicator& c) { return c.plane().peer_traffic(s, p); }); };
  ctx.ports = [](int s, int p) { return read_source([s, p](communicator& c) { return c.plane().connection_ports(s, p); }); };
  ctx.mailbox_sent = [](shm::mailbox_use u) { return read_source([u](communicator& c) { return c.mailbox_sent(u); }); };
  ctx.compression_off_on_shm = first.wire_compression().drops_for_job();
  auto made = telemetry::observer_from_config(ctx, cfg.telemetry);
  std::lock_guard lk(h.mu);
  if (!made || !*made) {  // off, or not possible (each part has warned)
    h.source = nullptr;
    return nullptr;
  }
  h.observer = *made;
  return *made;
}

void forget_telemetry_source(const communicator* comm) {
  auto& h = the_hub();
  std::lock_guard lk(h.mu);
  if (h.source == comm) h.source = nullptr;
}

}  // namespace chorus::ordered
