// replay_trace: N negotiators and fusion actors under the test coordinator, driven cycle by
// cycle from a trace (trace_replay.hpp).
#include "actors/trace_replay.hpp"

#include <algorithm>
#include <map>

#include <caf/scheduler/test_coordinator.hpp>

#include "actors/fusion_actor.hpp"
#include "actors/negotiator_actor.hpp"
#include "actors/protocol.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/process_sets/process_set.hpp"

namespace chorus {

namespace {

using telemetry::trace::rank_decisions;

/// Records one rank's decisions; called from that rank's actors (one thread here).
class capture final : public telemetry::observer {
 public:
  void on_cycle(const telemetry::cycle_event& c) override { d.cycles.push_back(c.cycle); }
  void on_agreed(uint64_t cycle, std::span<const std::string> names, std::span<const std::chrono::microseconds>,
                 telemetry::time_point) override {
    auto& v = d.agreed[cycle];
    v.insert(v.end(), names.begin(), names.end());
  }
  void on_bucket(const telemetry::bucket_event& b, telemetry::time_point) override { d.buckets.push_back(b); }
  rank_decisions d;
};

/// Stands in for a rank's producer and completion: ignores what they would get. (Not a
/// default handler: CAF's `drop` answers the sender with an error that would end it.) A class,
/// not a function: CAF 0.17 starts a function actor spawned without arguments by dereferencing
/// a null std::shared_ptr<std::tuple<>> (undefined behaviour, which UBSan reports).
class sink_actor final : public caf::event_based_actor {
 public:
  using caf::event_based_actor::event_based_actor;
  caf::behavior make_behavior() override {
    return {
        [](const op_finished&) {},
        [](const bucket_planned&) {},
    };
  }
};

}  // namespace

result<std::vector<rank_decisions>> replay_trace(const telemetry::trace::replay_input& in, const std::string& strategy) {
  const int n = in.size;
  negotiation::negotiation_options nopts;
  nopts.cycle_time = std::chrono::milliseconds(1);  // virtual time: see the header, step 2
  nopts.early_start = false;                        // the same cycles, started by the clock
  nopts.start_bytes = 0;                            // (nor by the bytes waiting)
  nopts.stall_warning_time = negotiation::duration::zero();
  nopts.stall_shutdown_time = negotiation::duration::zero();
  // Process sets: a set's members are the ranks that enqueued its tensors (every member takes
  // part in every one of them), registered under their recorded ids.
  std::map<int, std::vector<int>> members;
  for (const auto& rr : in.ranks)
    for (const auto& op : rr.ops) {
      auto& m = members[op.spec.process_set];
      if (op.spec.process_set != 0 && std::find(m.begin(), m.end(), rr.rank) == m.end()) m.push_back(rr.rank);
    }
  auto sets = std::make_shared<process_set_table>(n);
  for (auto& [id, ranks] : members)
    if (id != 0)
      if (auto st = sets->insert(id, ranks); !st.ok()) return status{errc::config, "replay: " + st.message()};
  nopts.process_sets = sets;
  for (int r = 0; r < n; ++r)
    if (auto s = negotiation::make_strategy(strategy, r, n, nopts); !s) return s.error();

  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());

  std::vector<std::shared_ptr<capture>> captures;
  std::vector<caf::actor> negotiators, fusions, sinks;
  for (int r = 0; r < n; ++r) {
    const auto& rr = in.ranks[static_cast<std::size_t>(r)];
    negotiator_config nc;
    nc.rank = r;
    nc.size = n;
    nc.strategy = strategy;
    nc.options = nopts;
    negotiators.push_back(sys.spawn(negotiator_actor, nc));
    fusion_config fc;
    fc.rank = r;
    fc.size = n;
    fc.fusion_threshold = rr.tuning.fusion_threshold;
    fc.chunk_bytes = rr.tuning.chunk_bytes;
    fc.in_place_bytes = rr.tuning.in_place_bytes;
    fc.direct_max_bytes = rr.direct_max_bytes;  // no lane: the plan only needs its size
    fc.pool_bytes = 1u << 20;  // never used: without senders no chunk is packed
    fc.pre_touch = false;
    fc.first_sequence = data_plane::pipeline_sequence_base;
    fc.process_sets = sets;
    fusions.push_back(sys.spawn(fusion_actor, fc));
    sinks.push_back(sys.spawn<sink_actor>());
    captures.push_back(std::make_shared<capture>());
  }
  for (int r = 0; r < n; ++r) {
    auto i = static_cast<std::size_t>(r);
    caf::anon_send(negotiators[i], negotiator_wiring{sinks[i], fusions[i], {}, captures[i]});
    caf::anon_send(fusions[i], fusion_wiring{sinks[i], {}, captures[i], nullptr});
    caf::anon_send(negotiators[i], peers_connected{negotiators});
  }
  sched.run();

  auto settle = [&] {
    sched.run();
    while (sched.trigger_timeout()) sched.run();
  };
  for (uint64_t c = 1; c <= in.cycles; ++c) {
    for (int r = 0; r < n; ++r)
      for (const auto& op : in.ranks[static_cast<std::size_t>(r)].ops) {
        if (op.cycle != c) continue;
        op_ref o;
        o.handle = op.handle;
        o.spec = op.spec;
        o.first_dim = op.first_dim;
        o.enqueued_at = sched.clock().now();
        caf::anon_send(negotiators[static_cast<std::size_t>(r)], tensor_ready{std::move(o)});
      }
    // Autotune: the window scores each rank contributed to this cycle (a cycle may run for a
    // score alone), after its ops so that both join the cycle.
    for (int r = 0; r < n; ++r) {
      const auto& scores = in.ranks[static_cast<std::size_t>(r)].scores;
      if (auto it = scores.find(c); it != scores.end())
        caf::anon_send(negotiators[static_cast<std::size_t>(r)], window_scored{it->second.score, it->second.digest});
    }
    settle();
    // The switches the autotuner recorded for windows agreed in this cycle: fusion plans the
    // batches of the next cycle with them, as it did in the job.
    for (int r = 0; r < n; ++r)
      for (const auto& e : in.ranks[static_cast<std::size_t>(r)].autotune) {
        if (e.cycle != c) continue;
        auto& fusion = fusions[static_cast<std::size_t>(r)];
        caf::anon_send(fusion, tunables_pending{c + 1});
        caf::anon_send(fusion, tunables_switch{c + 1, e.in_force.streams, e.in_force.chunk_bytes,
                                               e.in_force.fusion_threshold, e.in_force.in_place_bytes,
                                               e.in_force.cycle_time.count()});
      }
    settle();
    // A cycle that did not run (nothing new on any rank) would shift every later cycle's
    // number: stop here, so the comparison reports this cycle.
    bool ran = true;
    for (auto& cap : captures) ran &= !cap->d.cycles.empty() && cap->d.cycles.back() == c;
    if (!ran) break;
  }

  for (auto* group : {&negotiators, &fusions, &sinks})
    for (auto& a : *group) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  sched.run();
  std::vector<rank_decisions> out;
  for (auto& c : captures) out.push_back(std::move(c->d));
  return out;
}

}  // namespace chorus
