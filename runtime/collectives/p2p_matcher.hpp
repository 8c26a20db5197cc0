// Which point-to-point offer a posted receive takes, on the receiving rank alone (no rank needs to
// agree with another: the sender named the transfer's sequence in its offer). MPI's rules, which
// torch.distributed's send/recv follow: a receive takes the earliest offer that fits it (its tag,
// and its source unless it takes any source), and an offer goes to the earliest posted receive it
// fits. Offers from one sender arrive in the order it made them (one ordered control connection),
// so two sends to one rank with one tag are received in the order they were sent.
// Pure bookkeeping, no threads: the caller serialises calls.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace chorus {

/// A sender's offer of one transfer.
struct p2p_offer {
  int source = 0;
  int tag = 0;
  uint64_t sequence = 0;  ///< p2p_sequence(source, n): what the transfer's frames carry
  uint64_t bytes = 0;
};

/// A receive posted on this rank.
struct p2p_receive {
  uint64_t id = 0;   ///< the caller's handle
  int source = -1;   ///< -1: any source
  int tag = 0;
};

struct p2p_match {
  p2p_receive receive;
  p2p_offer offer;
};

class p2p_matcher {
 public:
  /// An offer arrived: the earliest posted receive it fits takes it; else it waits.
  std::optional<p2p_match> offered(const p2p_offer& o);
  /// A receive was posted: it takes the earliest waiting offer it fits; else it waits.
  std::optional<p2p_match> posted(const p2p_receive& r);
  /// Drops a waiting receive (the caller gave up on it); false when none has that id.
  bool withdraw(uint64_t id);
  /// Everything waiting, for failing it all at once; leaves the matcher empty.
  std::deque<p2p_receive> take_receives();
  std::size_t waiting_offers() const { return offers_.size(); }
  std::size_t waiting_receives() const { return receives_.size(); }

 private:
  static bool fits(const p2p_receive& r, const p2p_offer& o) {
    return r.tag == o.tag && (r.source < 0 || r.source == o.source);
  }
  std::deque<p2p_offer> offers_;      // arrival order
  std::deque<p2p_receive> receives_;  // post order
};

}  // namespace chorus
