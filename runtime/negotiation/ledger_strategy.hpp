// ledger_strategy: what the gossip and central strategies share. Both keep their state in a
// negotiation_ledger and count cycles the same way; the calls that only feed the ledger
// (a tensor ready, a score, shutdown, join, a timer) are written here once, and each
// strategy supplies advance(): how it starts, joins and finishes cycles.
// Thread-safety: none (strategy.hpp).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "runtime/negotiation/ledger.hpp"
#include "runtime/negotiation/strategy.hpp"

namespace chorus::negotiation {

class ledger_strategy : public negotiation_strategy {
 public:
  actions local_ready(tensor_spec spec, time_point now) final;
  actions local_ready_all(std::vector<tensor_spec> specs, time_point now) final;
  actions submit_score(double score, uint64_t digest, time_point now) final;
  actions request_shutdown(time_point now) final;
  actions request_join(time_point now) final;
  /// Feeds the ledger's timers (stalls), then advance(); a strategy may add its own timers.
  actions on_timer(time_point now) override;
  void set_timing(duration cycle_time, int64_t start_bytes) final { ledger_.set_timing(cycle_time, start_bytes); }
  bool joined() const final { return ledger_.joined(); }

  bool idle() const final { return !running_ && !ledger_.has_new(); }
  uint64_t cycles_done() const final { return last_cycle_; }
  uint64_t contribution_cycle() const final { return last_cycle_ + (running_ ? 2 : 1); }
  const tensor_registry& registry() const final { return ledger_.registry(); }

 protected:
  ledger_strategy(int rank, int size, const negotiation_options& options)
      : rank_(rank), size_(size), ledger_(rank, size, options) {}

  /// After every event: start, join or finish cycles as the strategy's protocol says, and
  /// set out.wake_at.
  virtual void advance(time_point now, actions& out) = 0;

  int rank_;
  int size_;
  negotiation_ledger ledger_;
  uint64_t last_cycle_ = 0;  // last finished cycle
  bool running_ = false;     // in (gossip) or waiting for the answer of (central) cycle last_cycle_ + 1
  std::optional<time_point> last_start_;
  gossip_message state_;     // this cycle's merged state (central: root's merge so far)
  cycle_stats stats_;
};

}  // namespace chorus::negotiation
