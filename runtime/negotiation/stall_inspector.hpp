// The stall inspector: watches tensors that are pending on some ranks but not on all, and
// turns "waited too long" into requests that the next cycle agrees on, so that warnings and
// the stall shutdown happen in the same cycle with the same text on every rank.
//
// Protocol (on top of the cycles of the strategy):
//  1. At the end of each cycle every rank observes the same pending keys (ids in OR but not
//     AND, names announced by some ranks but not all) and starts a local clock for new ones.
//  2. When a key's clock passes stall_warning_time, the rank puts it in its next contribution
//     as a query (stall_query / stalled_names); past stall_shutdown_time, as an abort.
//  3. Names carry their announcing ranks already: the end of the cycle that carries the query
//     emits the warning (or, for an abort, the fatal error) at once.
//  4. Ids travel as bits, so one more cycle is needed: at the end of the cycle carrying the
//     query every rank marks the id "report due"; in the next cycle each rank reports whether
//     it has the id pending, and the end of that cycle names the missing ranks.
//  5. A key agreed in the meantime is dropped at every step; each key warns once per wait.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/negotiation/bitmap.hpp"
#include "runtime/negotiation/message.hpp"
#include "runtime/negotiation/strategy.hpp"

namespace chorus::negotiation {

class stall_inspector {
 public:
  /// One pending key. `since` is local; the flags are decided at cycle ends (replicated),
  /// except `queried`/`abort_requested`, which also mean "this rank already asked".
  struct watch {
    time_point since;
    bool warned = false;
    bool queried = false;
    bool abort_requested = false;
  };

  explicit stall_inspector(const negotiation_options& options) : options_(options) {}

  /// Step 1. `pending_ids` and `pending_names` are replicated; `now` is this rank's clock.
  void observe(const dynamic_bitmap& pending_ids, const std::vector<std::string>& pending_names, time_point now);
  /// Step 2.
  void on_timer(time_point now);
  std::optional<time_point> next_deadline() const;
  /// A query, abort or report waits to be contributed.
  bool has_new() const;
  /// Fills the stall fields of this rank's contribution; `local_ids` = ids pending here.
  void contribute(gossip_message& m, const dynamic_bitmap& local_ids, int rank);
  /// Step 4, end of the cycle that carried queries: what the next cycle must report on.
  void schedule(const gossip_message& merged, const dynamic_bitmap& agreed);

  const dynamic_bitmap& report_due() const { return report_due_; }
  const dynamic_bitmap& abort_due() const { return abort_due_; }
  watch* find(uint32_t id);
  watch* find(const std::string& name);

 private:
  bool due(const watch& w, duration limit, time_point now) const;

  negotiation_options options_;
  std::map<uint32_t, watch> ids_;
  std::map<std::string, watch> names_;
  dynamic_bitmap query_fresh_, abort_fresh_;                 // step 2, not yet contributed
  std::set<std::string> name_query_fresh_, name_abort_fresh_;
  dynamic_bitmap report_due_, abort_due_;                    // step 4, replicated
};

}  // namespace chorus::negotiation
