// Clean leaves and the negotiation cycles they still allow. A rank that shuts down tells its
// peers how many negotiation cycles it finished (control_kind::leaving), before its goodbye.
// Having finished cycle X, it sent every message it owed for cycles up to X, so the ranks that
// stay can still finish those cycles and run what they agree (the leaver may have completed a
// broadcast as its root in cycle X: the others must get their part). Nothing of a later cycle
// can be agreed without it; negotiation ends with the goodbye's cause once cycle X is done here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "runtime/core/status.hpp"

namespace chorus {

class departures {
 public:
  /// `peer` will leave after finishing `cycles` cycles (its leaving notice).
  void announced(int peer, uint64_t cycles) { announced_[peer] = cycles; }

  /// `peer` said goodbye (`why` names it). True when negotiation goes on for now: the peer
  /// finished a cycle this rank, at `done_here` cycles, has not. False: end it now with `why`.
  bool left(int peer, const status& why, uint64_t done_here) {
    auto it = announced_.find(peer);
    if (it == announced_.end() || it->second <= done_here) return false;
    if (!why_ || it->second < until_) {
      why_ = why;
      until_ = it->second;
    }
    return true;
  }

  /// The cause to end negotiation with, once this rank has finished the cycles a departed peer
  /// took part in; nothing while they run or when nobody has left.
  std::optional<status> due(uint64_t done_here) const {
    if (why_ && done_here >= until_) return why_;
    return std::nullopt;
  }

  /// A peer left and negotiation goes on until cycle `until()` is done.
  bool waiting() const { return why_.has_value(); }
  uint64_t until() const { return until_; }

 private:
  std::map<int, uint64_t> announced_;
  std::optional<status> why_;
  uint64_t until_ = 0;
};

}  // namespace chorus
