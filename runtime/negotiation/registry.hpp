// tensor_registry: the agreed mapping name <-> id <-> spec. Every rank adds the same names in
// the same order (at the end of the same cycle), so ids are equal everywhere and an id can
// stand for its name in a readiness bitmap.
//
// A name may be registered again with another spec (Horovod lets a name come back with
// another shape once its previous operation has finished): the new spec gets an id and the
// old id is retired, on every rank at the end of the same cycle. Retired ids are handed out
// again, so the bitmaps in every gossip stay as wide as the names registered at once (plus a
// few retired ids waiting), not as the number of registrations so far (a script that
// broadcasts an object of another size under one name every epoch would otherwise grow every
// message by one bit per epoch, forever).
//
// Reuse rules (every rank applies them to the same sequence of add() calls, so every rank
// hands out the same id for the same name):
//  1. A registration takes the lowest free id; only when none is free does the range grow.
//  2. An id retired at the end of cycle c becomes free at cycle c + reuse_delay. Until then
//     it keeps its last spec, for two readers that may still look at it:
//     - the stall inspector's two-phase query, which names ids one cycle after they were
//       queried (stall_inspector.hpp step 4), so a query for the old id that was in flight
//       when it retired must still find the old spec;
//     - the consumers of one strategy call, which look the ids of the reported batches up in
//       the registry after the call returns (the negotiator actor does). A retired id was in
//       no batch of its retiring cycle (re-registration waits until no rank has it pending),
//       and one call resolves at most two cycles (gossip: a rank accepts messages of its
//       running cycle and the next only; central: one per call), so no call reports a batch
//       with the old meaning of an id next to the cycle that gives it a new one.
//  A transient name (tensor_spec::transient: used once, e.g. chorus.torch's unnamed ops) is
//  retired by retire() at the end of the very cycle that registers and agrees it, so its id
//  is in the batch of its retiring cycle (unlike a re-registered one). The consumers of that
//  batch still read its spec: the id is free again only at cycle c + reuse_delay, and the
//  call that reported cycle c resolves no cycle past c + 1. Nothing has it pending (it was
//  agreed by name, never by bit) and the name is not registered any more, so a later
//  enqueue of it (against the contract) is a first appearance again.
//  Nothing else holds a retired id: no rank has it pending (ledger.hpp), and contributions to
//  the next cycle are built after the retiring cycle was resolved.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::negotiation {

class tensor_registry {
 public:
  /// Cycles between retiring an id and handing it out again (rule 2).
  static constexpr uint64_t reuse_delay = 2;

  /// Registers spec.name at the end of cycle `cycle` (cycles never decrease from call to
  /// call) and returns its id: the lowest free id, or a new one at the end of the range. A
  /// name registered before is re-registered: its previous id is retired at `cycle`.
  uint32_t add(const tensor_spec& spec, uint64_t cycle);
  /// Retires the live id `id` at the end of cycle `cycle` (no later than the last add()):
  /// its name is no longer registered; the id is handed out again from cycle + reuse_delay.
  void retire(uint32_t id, uint64_t cycle);
  /// The current id of `name` (never a retired one).
  std::optional<uint32_t> find(std::string_view name) const;
  /// Requires id < size(). A retired id keeps its last spec until it is handed out again.
  const tensor_spec& spec(uint32_t id) const { return specs_[id]; }
  /// The id range [0, size()): the bitmaps' size. At most the number of names registered at
  /// once plus the ids retired in the last reuse_delay cycles.
  std::size_t size() const { return specs_.size(); }
  /// Requires id < size(): the id stands for no name now (retired, maybe free again).
  bool retired(uint32_t id) const { return !live_[id]; }
  /// Ids retired so far (re-registrations and transient names).
  std::size_t retired_count() const { return retired_count_; }
  /// Registrations that got an id handed out before (rule 1).
  std::size_t reused_count() const { return reused_count_; }
  /// Names registered now (ids not retired).
  std::size_t live_count() const { return ids_.size(); }

 private:
  std::vector<tensor_spec> specs_;
  std::vector<bool> live_;
  std::deque<std::pair<uint64_t, uint32_t>> waiting_;  // (retiring cycle, id), oldest first
  std::set<uint32_t> free_;
  std::size_t retired_count_ = 0;
  std::size_t reused_count_ = 0;
  std::unordered_map<std::string, uint32_t> ids_;
};

}  // namespace chorus::negotiation
