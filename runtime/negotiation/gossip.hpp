// gossip_negotiator: negotiation without a root (docs/design.md, section 3). One instance per rank;
// it sends and receives message_kind::gossip messages only.
//
// Protocol, for N ranks and L = ceil(log2 N) rounds:
//  1. Cycles are numbered 1, 2, 3, ...; every rank takes part in every cycle, in order, and
//     never starts cycle c+1 before finishing c.
//  2. A rank starts cycle c when it has something new (a tensor became ready, a stall query,
//     a score, a shutdown request) and at least cycle_time has passed since it started c-1;
//     or at once when it holds a message of cycle c (it joins, maybe with nothing new). An
//     idle job therefore sends nothing at all. With negotiation_options::early_start, also at
//     once when what other ranks were waiting for at the end of c-1 is now all new here
//     (negotiation_ledger::has_awaited: a late rank that caught up completes the agreement
//     without waiting out the cycle time). With negotiation_options::start_bytes, also at once
//     when the tensors new here hold that many bytes (negotiation_ledger::fills_bucket: a
//     fusion buffer's worth is waiting). With negotiation_options::hold_when_ahead, a rank
//     ahead of the others starts no cycle for new tensors: it joins the next one
//     (negotiation_ledger::holds_back).
//  3. Starting, the rank snapshots its contribution (negotiation_ledger::contribution()):
//     what becomes ready later belongs to the next cycle. That makes each cycle's merged
//     state a fixed function of the N snapshots.
//  4. In round k = 0..L-1 rank r sends its merged state to (r + 2^k) mod N and merges the
//     round-k message of (r - 2^k) mod N. It sends round k+1 only after merging round k, so
//     after round k it holds the merge of ranks r, r-1, ..., r-2^(k+1)+1; after round L-1,
//     all N. Messages that arrive early (later rounds, the next cycle) wait in a buffer.
//  5. After round L-1 every rank holds the same merged state and resolves the cycle with the
//     same code (ledger.hpp): ids for names every rank announced with equal specs (in name
//     order), one mismatch error per conflicting name, the batch of ids ready everywhere (in
//     id order), stall warnings. Exactly L messages sent per rank per cycle (0 for N = 1).
//  6. A message that breaks the schedule (wrong sender for its round, an old cycle, a
//     duplicate) stops negotiation with errc::protocol: it means a bug, not a slow peer.
#pragma once

#include <map>
#include <optional>
#include <utility>

#include "runtime/negotiation/ledger_strategy.hpp"

namespace chorus::negotiation {

class gossip_negotiator final : public ledger_strategy {
 public:
  gossip_negotiator(int rank, int size, const negotiation_options& options);

  actions on_message(const gossip_message& message, time_point now) override;

  std::string_view strategy_name() const override { return "gossip"; }

  /// The rank this rank sends to, and the rank it hears from, in round k.
  int send_peer(uint32_t round) const;
  int recv_peer(uint32_t round) const;

 private:
  /// Starts / joins cycles, merges buffered messages, and sets wake_at (steps 2-5).
  void advance(time_point now, actions& out) override;
  void start_cycle(time_point now, actions& out);
  void send_round(uint32_t round, actions& out);
  void finish_cycle(time_point now, actions& out);

  uint32_t rounds_;
  uint32_t next_round_ = 0;  // the round whose message we wait for
  std::map<std::pair<uint64_t, uint32_t>, gossip_message> early_;  // (cycle, round)
};

}  // namespace chorus::negotiation
