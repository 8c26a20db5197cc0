// negotiation_ledger: one rank's negotiation state, shared by both strategies. It knows what
// this rank has pending, builds the rank's contribution when a cycle starts and, when the
// strategy has merged every rank's contribution, resolves the cycle: assigns ids, reports
// mismatches, forms the agreed batch and runs the stall inspector. A name that comes back with
// another spec is announced again and re-registered (an id from the registry's reuse rules,
// the old one retired) once every rank announced it alike and no rank still has the old id
// pending; a rank that enqueued the old spec by id meanwhile re-announces it by name, so the
// disagreement ends as the usual mismatch error on every rank, never as a stall. A transient
// name (tensor_spec::transient) is retired from the registry at the end of the cycle that
// agrees it, so one-shot names leave no id behind. The
// strategies only decide how contributions travel (dissemination rounds, or through rank 0)
// and when cycles start; the same merged state gives the same results on every rank and
// under either strategy.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/negotiation/bitmap.hpp"
#include "runtime/negotiation/message.hpp"
#include "runtime/negotiation/registry.hpp"
#include "runtime/negotiation/stall_inspector.hpp"
#include "runtime/negotiation/strategy.hpp"

namespace chorus::negotiation {

class negotiation_ledger {
 public:
  negotiation_ledger(int rank, int size, const negotiation_options& options);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const negotiation_options& options() const { return options_; }
  const tensor_registry& registry() const { return registry_; }

  /// A local operation became ready. Refusals (an operation of that name still pending here,
  /// invalid spec, stopped) go to out.rejected; everything else waits for the next cycle: a
  /// registered name with its registered spec as one bit, anything else (a first appearance,
  /// a name coming back with another spec, a name some rank announced anew) as name + spec.
  void local_ready(tensor_spec spec, actions& out);
  void submit_score(double score, uint64_t digest);
  void set_timing(duration cycle_time, int64_t start_bytes) {
    options_.cycle_time = cycle_time;
    options_.start_bytes = start_bytes;
  }
  void request_shutdown() { shutdown_fresh_ = true; }
  /// See negotiation_strategy::request_join.
  void request_join();
  bool joined() const { return joined_; }

  /// Something not yet contributed to a cycle: the reason to start one.
  bool has_new() const;
  /// This rank has caught up: everything other ranks were waiting for at the end of the last
  /// cycle (ids pending there and not here, names announced there and not here) is now new
  /// here. A cycle started now may agree all of it at once, so the gossip strategy starts one
  /// without waiting out the cycle time. A rank that is a little late (at N=2: its tensor
  /// reached its negotiator just after its peer's cycle did) then costs one cycle, not a
  /// cycle time, and a rank that is far behind still sends everything in one cycle.
  bool has_awaited() const;
  /// negotiation_options::start_bytes is on and the tensors enqueued here since the last
  /// contribution hold at least that many bytes: what this rank announces now fills a fusion
  /// buffer (the peers may not all have it yet).
  bool fills_bucket() const;
  /// With negotiation_options::hold_when_ahead: this rank is ahead (it waited for other ranks
  /// at the end of the last cycle, and no rank had anything it lacked) and only tensors are
  /// new here, so it need not start a cycle: the ranks behind start the next one when they
  /// catch up, and this rank contributes everything new when it joins. Two ranks cannot both
  /// be ahead of each other, so some rank always can start (no rank waits on a holder that
  /// waits on it), and anything not a tensor (score, shutdown, join, stall report) starts a
  /// cycle as before.
  bool holds_back() const;
  bool failed() const { return failed_; }

  /// This rank's contribution to the cycle that starts now (payload only). Takes the fresh
  /// items: what becomes ready after this call belongs to the next cycle.
  gossip_message contribution();
  /// End of a cycle: `merged` holds every rank's contribution. Identical merged states give
  /// identical results (ids, errors, batch, warnings, fatal text) on every rank.
  void resolve(const gossip_message& merged, uint64_t cycle, time_point now, actions& out);

  void on_timer(time_point now) { stall_.on_timer(now); }
  std::optional<time_point> next_deadline() const;
  /// Stops negotiation with `error` (reported once in out.fatal).
  void fail(status error, actions& out);

 private:
  dynamic_bitmap table_ranks(const std::vector<announcement>& groups) const;
  /// Registered ids whose process set leaves this rank out (it counts as ready for them).
  dynamic_bitmap foreign_ids() const;
  /// The ranks outside `spec`'s process set (empty for the global set).
  dynamic_bitmap outsiders(const tensor_spec& spec) const;
  /// An error when `spec`'s process set is unknown or leaves this rank out; ok otherwise.
  status check_set(const tensor_spec& spec) const;
  /// Adds a tensor enqueued here to fresh_bytes_ (fills_bucket).
  void count_fresh(const tensor_spec& spec);
  /// Step 8 of resolve(): folds the cycle's scores into the window; reports it when complete.
  void resolve_window(const gossip_message& merged, uint64_t cycle, actions& out);

  int rank_;
  int size_;
  negotiation_options options_;
  tensor_registry registry_;
  // Local: what this rank has enqueued and not yet seen agreed.
  dynamic_bitmap pending_ids_;
  bool fresh_ids_ = false;
  int64_t fresh_bytes_ = 0;     // of the tensors enqueued since the last contribution
  dynamic_bitmap contributed_;  // pending_ids_ as of the last contribution
  dynamic_bitmap awaited_;      // after the last resolve: pending on another rank, not in contributed_
  bool ahead_ = false;          // after the last resolve: see holds_back()
  std::map<std::string, tensor_spec> local_names_;
  std::vector<tensor_spec> fresh_names_;
  std::optional<double> fresh_score_;
  uint64_t fresh_digest_ = 0;
  // Replicated: the window being agreed (autotuner): ranks that scored it, their minimum
  // score and their digests; and how many windows were agreed.
  dynamic_bitmap window_ranks_;
  double window_min_ = std::numeric_limits<double>::infinity();
  std::vector<digest_group> window_digests_;
  uint64_t windows_agreed_ = 0;
  bool shutdown_fresh_ = false;
  bool joined_ = false;        // this rank called join; cleared when every rank has
  bool join_fresh_ = false;    // ... and has not contributed that yet
  // Replicated: the ranks known to have joined after the last resolved cycle.
  dynamic_bitmap joined_seen_;
  // Replicated: names announced by some ranks but not yet by all, per spec.
  std::map<std::string, std::vector<announcement>> table_;
  stall_inspector stall_;
  bool failed_ = false;
  status failure_;
};

}  // namespace chorus::negotiation
