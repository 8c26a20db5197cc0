// Negotiator actors of N ranks in one actor system, driven message by message by CAF's test
// coordinator (scheduler.policy "testing", a virtual clock, no sleeps), each with a sink standing
// in for its producer and fusion actor. Shared by the negotiator tests.
#pragma once

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/negotiator_actor.hpp"
#include "tests/actors/class_actor.hpp"

namespace chorus::test {

struct sink_state {
  std::vector<batch_agreed> batches;
  std::vector<op_finished> finished;
};

inline caf::behavior sink_actor(caf::stateful_actor<sink_state>* self) {
  return {
      [=](batch_agreed& b) { self->state.batches.push_back(std::move(b)); },
      [=](op_finished& f) { self->state.finished.push_back(std::move(f)); },
  };
}

template <class State>
State& state_of(const caf::actor& a) {
  return dynamic_cast<caf::stateful_actor<State>&>(*caf::actor_cast<caf::abstract_actor*>(a)).state;
}

inline tensor_spec spec(std::string name, std::vector<int64_t> shape, dtype type = dtype::f32) {
  return tensor_spec{std::move(name), collective_kind::allreduce, type, std::move(shape), reduce_op::sum, -1,
                     device_kind::cpu, 0};
}

/// N negotiators, each with a sink standing in for its producer and fusion actor.
struct ranks_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::vector<caf::actor> negotiators, sinks;
  uint64_t next_handle = 1;

  /// `tweak` may change each rank's config before it is spawned (e.g. to wire a control link).
  ranks_fixture(int n, const std::string& strategy, negotiation::negotiation_options opts = {},
                const std::function<void(negotiator_config&)>& tweak = {}) {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    for (int r = 0; r < n; ++r) {
      negotiator_config c;
      c.rank = r;
      c.size = n;
      c.strategy = strategy;
      c.options = opts;
      if (tweak) tweak(c);
      negotiators.push_back(sys->spawn(negotiator_actor, c));
      sinks.push_back(sys->spawn<::chorus::test::class_actor<sink_state, sink_actor>>());
    }
    for (int r = 0; r < n; ++r) {
      caf::anon_send(negotiators[r], negotiator_wiring{sinks[r], sinks[r], {}, nullptr});
      caf::anon_send(negotiators[r], peers_connected{negotiators});
    }
    sched->run();
  }
  ~ranks_fixture() {
    for (auto& a : negotiators) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    for (auto& a : sinks) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched->run();
    negotiators.clear();
    sinks.clear();
  }
  int size() const { return static_cast<int>(negotiators.size()); }
  void ready(int rank, tensor_spec s) {
    op_ref o;
    o.handle = next_handle++;
    o.spec = std::move(s);
    o.enqueued_at = sched->clock().now();
    caf::anon_send(negotiators[rank], tensor_ready{o});
  }
  /// Runs every message and every timer, earliest first, until nothing is left (bounded).
  void settle() {
    for (int i = 0; i < 100000; ++i) {
      sched->run();
      if (!sched->trigger_timeout()) return;
    }
    FAIL() << "the negotiators never went idle";
  }
  sink_state& sink(int r) { return state_of<sink_state>(sinks[r]); }
  negotiator_state& neg(int r) { return state_of<negotiator_state>(negotiators[r]); }
  /// Each rank's agreed batches as lists of names.
  std::vector<std::vector<std::string>> batches(int r) {
    std::vector<std::vector<std::string>> out;
    for (auto& b : sink(r).batches) {
      out.emplace_back();
      for (auto& o : b.ops) out.back().push_back(o.spec.name);
    }
    return out;
  }
};

}  // namespace chorus::test
