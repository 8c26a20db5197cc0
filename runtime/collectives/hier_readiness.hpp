// When the bytes of a hierarchical chunk are ready for a phase (hier_schedule.hpp's steps),
// range by range rather than phase by phase: a range may be sent, or received into, by a step
// of phase p once every receive of an earlier phase that covers any of its bytes has been
// consumed. So the cross-host ring of a segment starts as soon as that segment is reduced inside
// the host, and its allgather inside the host as soon as it is final, while the rest of the
// chunk is still on its way. Plain value; one op's I/O thread uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "runtime/collectives/hier_schedule.hpp"

namespace chorus {

class hier_readiness {
 public:
  /// Every receive of `steps` is outstanding.
  explicit hier_readiness(const std::vector<hier_step>& steps);
  /// Whether no receive of a phase before `phase` still covers a byte of [offset, offset + length).
  bool ready(int phase, std::size_t offset, std::size_t length) const;
  /// A receive of `phase` over [offset, offset + length) has been consumed. False, and nothing
  /// changed, when some byte of it was not expected any more (a bug of the caller's checks).
  bool received(int phase, std::size_t offset, std::size_t length);

 private:
  static constexpr int phases = 3;
  /// Adds `delta` to the count of phase `p` over [lo, hi); false (nothing changed) where a
  /// count would go below zero or `p` is no phase.
  bool add(int p, std::size_t lo, std::size_t hi, int delta);
  /// Per phase, receives still to come over each byte, as a step function: the count at key k
  /// holds up to the next key (absent at the start: zero).
  std::map<std::size_t, int> left_[phases];
};

}  // namespace chorus
