// The control gate (control_gate.hpp): seal checks on the delivering thread, then a hand-off
// to the negotiator.
#include "actors/control_gate.hpp"

#include <span>
#include <string>

#include "runtime/core/log.hpp"

namespace chorus {

namespace {

wire::control_envelope envelope_of(const sealed_control& m) {
  return {static_cast<uint32_t>(m.from), static_cast<uint32_t>(m.to), m.counter, static_cast<uint8_t>(m.kind),
          m.origin};
}

}  // namespace

// ---- control_verifier ----------------------------------------------------------------------

control_verifier::control_verifier(int rank, int size, const wire::mac& key)
    : rank_(rank), size_(size), key_(key), last_(static_cast<std::size_t>(size), 0) {}

status control_verifier::check(const sealed_control& m) {
  auto refuse = [&](const std::string& why) {
    return status{errc::auth, "control plane: refused a message claiming to come from rank " +
                                  std::to_string(m.from) + ": " + why};
  };
  if (m.from < 0 || m.from >= size_ || m.from == rank_)
    return refuse("no such peer in a job of " + std::to_string(size_) + " ranks (this is rank " +
                  std::to_string(rank_) + ")");
  if (m.to != rank_) return refuse("addressed to rank " + std::to_string(m.to) + ", this is rank " + std::to_string(rank_));
  if (m.kind != control_kind::gossip && m.kind != control_kind::hello && m.kind != control_kind::gone &&
      m.kind != control_kind::leaving)
    return refuse("unknown kind " + std::to_string(static_cast<int>(m.kind)));
  wire::mac tag{};
  if (m.tag.size() != tag.size()) return refuse("seal of " + std::to_string(m.tag.size()) + " bytes, expected 32");
  std::copy(m.tag.begin(), m.tag.end(), tag.begin());
  if (!key_.matches(envelope_of(m), std::span(m.data), tag))
    return refuse("wrong seal (not sealed with this job's secret, or altered)");
  auto& last = last_[static_cast<std::size_t>(m.from)];
  if (m.counter <= last)
    return refuse("counter " + std::to_string(m.counter) + " already seen (last " + std::to_string(last) +
                  "): a replay");
  last = m.counter;
  return {};
}

// ---- control_sealer ------------------------------------------------------------------------

control_sealer::control_sealer(int rank, int size, const wire::mac& key)
    : rank_(rank), key_(key), next_(static_cast<std::size_t>(size), 1) {}

sealed_control control_sealer::make(int to, control_kind kind, std::vector<uint8_t> data, int origin) {
  sealed_control m;
  m.from = rank_;
  m.to = to;
  m.counter = next_[static_cast<std::size_t>(to)]++;
  m.kind = kind;
  m.origin = origin;
  m.data = std::move(data);
  auto tag = key_.seal(envelope_of(m), std::span(m.data));
  m.tag.assign(tag.begin(), tag.end());
  return m;
}

// ---- control_gate --------------------------------------------------------------------------

control_gate::control_gate(int rank, int size, const wire::mac& key, caf::actor negotiator,
                           std::shared_ptr<telemetry::observer> observer)
    : verifier_(rank, size, key), negotiator_(std::move(negotiator)), observer_(std::move(observer)) {}

std::shared_ptr<control_gate> control_gate::spawn(caf::actor_system& sys, int rank, int size, const wire::mac& key,
                                                  caf::actor negotiator,
                                                  std::shared_ptr<telemetry::observer> observer) {
  std::shared_ptr<control_gate> g(new control_gate(rank, size, key, std::move(negotiator), std::move(observer)));
  g->handle_ = sys.spawn<caf::actor_companion>();
  auto* companion = static_cast<caf::actor_companion*>(caf::actor_cast<caf::abstract_actor*>(g->handle_));
  // close() (at the latest the destructor) removes this handler and waits for a delivery in
  // progress, so the raw pointer never outlives the gate.
  companion->on_enqueue([self = g.get()](caf::mailbox_element_ptr e) {
    if (e) self->deliver(*e);
  });
  return g;
}

control_gate::~control_gate() { close(); }

void control_gate::close(caf::exit_reason why) {
  caf::actor h;
  {
    std::lock_guard lk(mu_);
    if (closed_ || !handle_) return;
    closed_ = true;
    h = handle_;
  }
  // What actor_companion::disconnect would do (CAF 0.17.6 declares it but never defines it):
  // drop the handler (waits for a delivery in progress), then terminate, which tells every
  // watcher, local or remote, `why`.
  auto* companion = static_cast<caf::actor_companion*>(caf::actor_cast<caf::abstract_actor*>(h));
  companion->on_enqueue(nullptr);
  caf::scoped_execution_unit ctx{&companion->home_system()};
  companion->cleanup(caf::make_error(why), &ctx);
}

void control_gate::refuse(const std::function<status()>& why) {
  auto n = refused_.fetch_add(1, std::memory_order_relaxed) + 1;
  bool log = n <= 20 || n % 1000 == 0;
  if (!log && !observer_) return;
  auto st = why();
  if (log) CHORUS_LOG(warn, "pipeline", st.message() << " (refused so far: " << n << ")");
  if (observer_) observer_->on_error(to_string(st.code()), st, std::chrono::steady_clock::now());
}

void control_gate::deliver(caf::mailbox_element& e) {
  const auto& content = e.content();
  // (sealed_control) or, for a hello, (sealed_control, the sender's gate).
  bool sealed = content.match_elements<sealed_control>() || content.match_elements<sealed_control, caf::actor>();
  if (!sealed) {
    refuse([&] {
      std::string what = content.stringify();
      if (what.size() > 120) what = what.substr(0, 117) + "...";
      return status{errc::auth, "control plane: refused a message that is not sealed with the job secret: " + what};
    });
    return;
  }
  const auto& m = content.get_as<sealed_control>(0);
  status verdict;
  {
    std::lock_guard lk(mu_);
    if (closed_) return;
    verdict = verifier_.check(m);
  }
  if (!verdict.ok()) {
    refuse([&] { return verdict; });
    return;
  }
  switch (m.kind) {
    case control_kind::gossip:
      caf::anon_send(negotiator_, gossip_bytes{m.data});
      break;
    case control_kind::hello: {
      caf::actor gate = content.size() == 2 ? content.get_as<caf::actor>(1) : caf::actor{};
      if (!gate) {
        refuse([&] {
          return status{errc::auth, "control plane: a sealed hello from rank " + std::to_string(m.from) + " names no gate"};
        });
        return;
      }
      caf::anon_send(negotiator_, hello_atom::value, static_cast<int>(m.from), std::move(gate));
      break;
    }
    case control_kind::gone:
      caf::anon_send(negotiator_, gone_atom::value, static_cast<int>(m.origin),
                     std::string(m.data.begin(), m.data.end()));
      break;
    case control_kind::leaving: {
      auto cycles = leaving_cycles(m.data);
      if (!cycles) {
        refuse([&] {
          return status{errc::protocol, "control plane: rank " + std::to_string(m.from) + "'s leaving notice has " +
                                            std::to_string(m.data.size()) + " bytes, expected 8"};
        });
        return;
      }
      caf::anon_send(negotiator_, leaving_atom::value, static_cast<int>(m.from), *cycles);
      break;
    }
  }
}

}  // namespace chorus
