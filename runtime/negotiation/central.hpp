// central_negotiator: Horovod's root-coordinator scheme behind the same interface and the
// same message type, as the baseline the gossip strategy is measured against.
//
// Protocol:
//  1. Cycles are numbered and taken in order, as in gossip.hpp; the cycle-time lower bound
//     and "an idle job sends nothing" hold the same way.
//  2. A worker (rank != 0) with something new, cycle_time after its previous start, snapshots
//     its contribution and sends it to rank 0 as a `report` for the next cycle.
//  3. Rank 0 opens cycle c when it has something new itself (and cycle_time has passed) or
//     when the first report of c arrives. Opening, it snapshots its own contribution. Busy
//     workers report within a cycle time (as Horovod's workers do on every tick); to the
//     workers still silent one cycle_time after opening, rank 0 sends a `poll` (from
//     on_timer only, so reports already queued in its mailbox are merged first).
//  4. A worker polled for a cycle it has not reported joins it: it sends its (maybe empty)
//     report at once. A poll for a cycle it already reported (even one whose answer it has
//     received) is the expected race with its own report and is ignored; a poll that
//     overtakes the previous cycle's answer waits for that answer.
//  5. When rank 0 holds all N contributions it merges them, sends the merged state to every
//     worker as the `answer`, and every rank (rank 0 included) resolves the cycle with the
//     ledger, exactly as gossip does: same merged state, same ids, batches and errors. If
//     rank 0 then has something new and may start, it opens the next cycle at once and the
//     answer says so (open_next): every worker reports to it at once, no poll needed.
//  6. Rank 0 handles N-1 reports and N-1 answers per cycle (2(N-1) messages), plus up to
//     N-1 polls when a cycle opened by a report finds workers with nothing to report; a
//     worker sends one message per cycle.
//     The poll delay is the price of an idle job costing nothing: a cycle with idle workers
//     takes at least one cycle_time (Horovod's idle workers also answer on their next tick).
#pragma once

#include <optional>

#include "runtime/negotiation/ledger_strategy.hpp"

namespace chorus::negotiation {

class central_negotiator final : public ledger_strategy {
 public:
  central_negotiator(int rank, int size, const negotiation_options& options);

  actions on_message(const gossip_message& message, time_point now) override;
  actions on_timer(time_point now) override;

  std::string_view strategy_name() const override { return "central"; }

 private:
  void advance(time_point now, actions& out) override;
  /// `first_report`: rank 0 opens the cycle because this report arrived. `workers_told`:
  /// the answer that precedes it said open_next, so nobody needs a poll.
  void start_cycle(time_point now, actions& out, const gossip_message* first_report = nullptr,
                   bool workers_told = false);
  void root_merge(const gossip_message& report, time_point now, actions& out);
  /// Rank 0 holds every contribution: resolve, answer, maybe open the next cycle.
  void root_complete(time_point now, actions& out);
  void poll_silent_workers(time_point now, actions& out);
  void root_receive(const gossip_message& m, time_point now, actions& out);
  void worker_receive(const gossip_message& m, time_point now, actions& out);
  /// A worker got the answer: resolve it.
  void finish_cycle(const gossip_message& merged, time_point now, actions& out);
  gossip_message header(message_kind kind, uint64_t cycle) const;

  dynamic_bitmap reported_;  // root: ranks whose contribution to the open cycle it holds
  std::optional<time_point> poll_at_;  // root: when to poll the workers still silent
  bool poll_waiting_ = false;  // worker: a poll for the next cycle overtook this cycle's answer
};

}  // namespace chorus::negotiation
