// Contributions and cycle resolution, common to the gossip and central strategies.
#include "runtime/negotiation/ledger.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "runtime/negotiation/diagnostics.hpp"

namespace chorus::negotiation {

negotiation_ledger::negotiation_ledger(int rank, int size, const negotiation_options& options)
    : rank_(rank), size_(size), options_(options), stall_(options) {}

void negotiation_ledger::local_ready(tensor_spec spec, actions& out) {
  auto refuse = [&](errc code, std::string text) { out.rejected.push_back({spec.name, status{code, std::move(text)}}); };
  if (failed_) return refuse(errc::shutdown, describe(spec) + ": negotiation stopped: " + failure_.message());
  if (auto st = validate(spec, size_); !st.ok()) return refuse(st.code(), st.message());
  if (auto st = check_set(spec); !st.ok()) return refuse(st.code(), st.message());
  if (local_names_.count(spec.name)) {
    return refuse(errc::invalid_argument,
                  describe(spec) + ": enqueued again before the previous operation on this name was agreed");
  }
  if (auto id = registry_.find(spec.name)) {
    if (pending_ids_.test(*id)) {
      return refuse(errc::invalid_argument, describe(spec) + ": enqueued again before the previous operation "
                                                             "on this name was agreed");
    }
    // The registered spec travels as one bit, unless some rank has announced the name anew
    // (its next operation may carry another spec): then it is compared by name and spec.
    if (registry_.spec(*id) == spec && !table_.count(spec.name)) {
      pending_ids_.set(*id);
      fresh_ids_ = true;
      count_fresh(spec);
      return;
    }
  }
  // A first appearance, or a name coming back with another spec (re-registration): it
  // travels as name + spec and gets a new id once every rank announced it alike.
  count_fresh(spec);
  local_names_.emplace(spec.name, spec);
  fresh_names_.push_back(std::move(spec));
}

void negotiation_ledger::submit_score(double score, uint64_t digest) {
  fresh_score_ = std::min(score, fresh_score_.value_or(score));
  fresh_digest_ = digest;
}

void negotiation_ledger::request_join() {
  if (joined_) return;
  joined_ = true;
  join_fresh_ = true;
}

bool negotiation_ledger::has_new() const {
  if (failed_) return false;
  return fresh_ids_ || !fresh_names_.empty() || fresh_score_ || shutdown_fresh_ || join_fresh_ || stall_.has_new();
}

void negotiation_ledger::count_fresh(const tensor_spec& spec) {
  // Saturating: each size fits an int64 (validate), their sum need not.
  const int64_t bytes = spec.byte_size();
  fresh_bytes_ = bytes > std::numeric_limits<int64_t>::max() - fresh_bytes_ ? std::numeric_limits<int64_t>::max()
                                                                            : fresh_bytes_ + bytes;
}

bool negotiation_ledger::fills_bucket() const {
  return !failed_ && options_.start_bytes > 0 && fresh_bytes_ >= options_.start_bytes;
}

bool negotiation_ledger::has_awaited() const {
  if (failed_ || (!fresh_ids_ && fresh_names_.empty())) return false;
  bool any = false;
  for (const auto& [name, groups] : table_) {
    if (table_ranks(groups).test(static_cast<std::size_t>(rank_))) continue;  // announced here already
    if (!local_names_.count(name)) return false;                              // awaited, not here yet
    any = true;
  }
  if (awaited_.any()) {
    dynamic_bitmap missing = awaited_;
    missing.and_not(pending_ids_);
    if (missing.any()) return false;
    any = true;
  }
  return any;
}

bool negotiation_ledger::holds_back() const {
  if (!options_.hold_when_ahead || !ahead_ || failed_) return false;
  bool only_tensors = !fresh_score_ && !shutdown_fresh_ && !join_fresh_ && !stall_.has_new();
  return only_tensors && (fresh_ids_ || !fresh_names_.empty());
}

gossip_message negotiation_ledger::contribution() {
  gossip_message m;
  pending_ids_.resize(registry_.size());
  contributed_ = pending_ids_;
  m.ready_and = pending_ids_;
  m.ready_or = pending_ids_;
  std::sort(fresh_names_.begin(), fresh_names_.end(), spec_less);
  for (auto& spec : fresh_names_) {
    // A member announces for the ranks outside its set too: they never enqueue the name.
    announcement a{std::move(spec), {}};
    a.ranks = outsiders(a.spec);
    a.ranks.set(static_cast<std::size_t>(rank_));
    m.announced.push_back(std::move(a));
  }
  fresh_names_.clear();
  fresh_ids_ = false;
  fresh_bytes_ = 0;
  const auto foreign = foreign_ids();
  m.ready_and.or_with(foreign);  // ready for what its sets leave it out of
  // A stall report never blames a rank for a tensor of a set it is not in.
  dynamic_bitmap answered = pending_ids_;
  answered.or_with(foreign);
  stall_.contribute(m, answered, rank_);
  if (fresh_score_) {
    m.score_min = *fresh_score_;
    m.scored.set(static_cast<std::size_t>(rank_));
    digest_group g{fresh_digest_, {}};
    g.ranks.set(static_cast<std::size_t>(rank_));
    m.digests.push_back(std::move(g));
  }
  fresh_score_.reset();
  m.shutdown = shutdown_fresh_;
  shutdown_fresh_ = false;
  if (joined_) {
    // A joined rank is ready for every registered id (AND identity); its real pending ids
    // stay in ready_or, so stall checks do not see it as waiting for anything.
    m.ready_and = dynamic_bitmap(registry_.size(), true);
    m.joined.set(static_cast<std::size_t>(rank_));
    join_fresh_ = false;
  }
  return m;
}

dynamic_bitmap negotiation_ledger::foreign_ids() const {
  dynamic_bitmap out(registry_.size());
  if (!options_.process_sets) return out;
  auto sets = options_.process_sets->all();
  if (sets.size() < 2) return out;
  for (uint32_t id = 0; id < registry_.size(); ++id) {
    int set = registry_.spec(id).process_set;
    if (set == 0) continue;
    auto it = std::find_if(sets.begin(), sets.end(), [&](const auto& p) { return p->id == set; });
    if (it != sets.end() && !(*it)->includes(rank_)) out.set(id);
  }
  return out;
}

dynamic_bitmap negotiation_ledger::outsiders(const tensor_spec& spec) const {
  dynamic_bitmap out;
  if (spec.process_set == 0 || !options_.process_sets) return out;
  auto set = options_.process_sets->find(spec.process_set);
  if (!set) return out;
  for (int r = 0; r < size_; ++r)
    if (!set->includes(r)) out.set(static_cast<std::size_t>(r));
  return out;
}

status negotiation_ledger::check_set(const tensor_spec& spec) const {
  if (spec.process_set == 0) return {};
  auto set = options_.process_sets ? options_.process_sets->find(spec.process_set) : nullptr;
  if (!set)
    return {errc::invalid_argument,
            describe(spec) + ": process set " + std::to_string(spec.process_set) + " does not exist or has not been registered"};
  if (!set->includes(rank_))
    return {errc::invalid_argument, describe(spec) + ": rank " + std::to_string(rank_) +
                                        " is not a member of the provided process set (ranks " + set->rank_list() + ")"};
  return {};
}

dynamic_bitmap negotiation_ledger::table_ranks(const std::vector<announcement>& groups) const {
  dynamic_bitmap all;
  for (const auto& g : groups) all.or_with(g.ranks);
  return all;
}

void negotiation_ledger::resolve(const gossip_message& merged, uint64_t cycle, time_point now, actions& out) {
  if (failed_) return;
  dynamic_bitmap agreed = merged.ready_and;
  agreed.resize(registry_.size());
  // Joined ranks claim every id (ready_and) but only their real ones in ready_or: an id must
  // also be pending somewhere, which matters once every rank has joined.
  dynamic_bitmap somewhere = merged.ready_or;
  somewhere.resize(registry_.size());
  agreed.and_with(somewhere);
  std::vector<std::string> fatal;
  // A set's operation names its members only: ranks outside the set count as ready in the
  // gossip (they never enqueue it) but are neither ready nor lagging.
  auto members = [&](const tensor_spec& spec) { return complement(outsiders(spec), size_); };
  auto warn = [&](const std::string& name, const tensor_spec& spec, const dynamic_bitmap& ready) {
    auto lagging = members(spec);
    lagging.and_not(ready);
    out.warnings.push_back({cycle, name, rank_list(lagging), stall_message(spec, ready, members(spec), options_, false)});
  };

  // 1. Stall reports asked for at the end of the previous cycle (ids).
  stall_.report_due().for_each_set([&](std::size_t i) {
    auto id = static_cast<uint32_t>(i);
    if (agreed.test(id)) return;
    dynamic_bitmap ready;
    auto rep = std::find_if(merged.reports.begin(), merged.reports.end(), [&](const stall_report& r) { return r.id == id; });
    if (rep != merged.reports.end()) ready = rep->ranks;
    if (stall_.abort_due().test(id)) {
      fatal.push_back(stall_message(registry_.spec(id), ready, members(registry_.spec(id)), options_, true));
    } else if (auto* w = stall_.find(id); w && !w->warned) {
      w->warned = true;
      warn(registry_.spec(id).name, registry_.spec(id), ready);
    }
  });

  // 2. Names: a name announced by every rank gets the next id (in name order) if all specs
  //    agree, or one mismatch error otherwise.
  for (const auto& a : merged.announced) {
    auto& groups = table_[a.spec.name];
    auto at = std::lower_bound(groups.begin(), groups.end(), a,
                               [](const announcement& x, const announcement& y) { return spec_less(x.spec, y.spec); });
    if (at != groups.end() && at->spec == a.spec) {
      at->ranks.or_with(a.ranks);
    } else {
      groups.insert(at, a);
    }
  }
  //    Joined ranks count as having announced every name. A name registered before is
  //    re-registered only when no rank still has an operation of its old id pending.
  //    Ids come from the registry's reuse rules (registry.hpp): the lowest free one, taken in
  //    name order, so every rank hands out the same ids.
  std::vector<uint32_t> new_ids;
  std::vector<tensor_spec> requeued;
  std::vector<uint32_t> transient_ids;
  for (auto it = table_.begin(); it != table_.end();) {
    auto announced = table_ranks(it->second);
    announced.or_with(merged.joined);
    auto old_id = registry_.find(it->first);
    if (announced.count() < static_cast<std::size_t>(size_) || (old_id && somewhere.test(*old_id))) {
      ++it;
      continue;
    }
    local_names_.erase(it->first);
    if (it->second.size() == 1) {
      auto id = registry_.add(it->second.front().spec, cycle);  // retires old_id, if any
      out.assigned.push_back({it->first, id, it->second.front().spec, cycle});
      new_ids.push_back(id);
      if (it->second.front().spec.transient) transient_ids.push_back(id);
      // The old id was pending nowhere in this cycle's contributions; a rank that enqueued
      // its spec since (only a joined rank can: every other rank announced the name) must
      // not keep the bit of an id that will stand for another name: it goes by name.
      if (old_id && pending_ids_.test(*old_id)) {
        pending_ids_.reset(*old_id);
        requeued.push_back(registry_.spec(*old_id));
      }
    } else {
      // Name the ranks that announced each spec, not the ranks outside the set that members
      // announced for.
      auto groups = it->second;
      const auto outside = outsiders(groups.front().spec);
      for (auto& g : groups) g.ranks.and_not(outside);
      out.errors.push_back({cycle, it->first, mismatch_message(groups)});
    }
    it = table_.erase(it);
  }
  for (auto& spec : requeued) {
    local_names_.emplace(spec.name, spec);
    fresh_names_.push_back(std::move(spec));
  }
  //    A name announced anew while this rank has an operation of its registered spec pending
  //    by id (the ranks disagree about that name's next operation): that operation is
  //    announced by name and spec from the next cycle on, so the name's table entry completes
  //    with every rank's spec and becomes the mismatch error above, on every rank alike.
  for (const auto& [name, groups] : table_) {
    auto id = registry_.find(name);
    if (!id || !pending_ids_.test(*id) || agreed.test(*id)) continue;
    pending_ids_.reset(*id);
    const auto& registered = registry_.spec(*id);
    local_names_.emplace(name, registered);
    fresh_names_.push_back(registered);
  }

  // 3. The batch: ids pending on every rank, in id order, then the ids assigned in this cycle
  //    in name order (a reused id may be smaller than the others).
  auto batch = agreed.to_vector();
  batch.insert(batch.end(), new_ids.begin(), new_ids.end());
  pending_ids_.and_not(agreed);
  //    While some (not all) ranks have joined, what they cannot take part in ends with an error
  //    on every rank instead (allgather, alltoall, a broadcast from a joined root).
  if (merged.joined.any() && merged.joined.count() < static_cast<std::size_t>(size_)) {
    std::erase_if(batch, [&](uint32_t id) {
      const auto& spec = registry_.spec(id);
      auto why = join_refusal(spec, merged.joined);
      if (why.empty()) return false;
      out.errors.push_back({cycle, spec.name, std::move(why), errc::invalid_argument});
      return true;
    });
  }
  if (!batch.empty()) out.batches.push_back({cycle, std::move(batch)});
  //    A transient name is used once: agreed now (on every rank, in this same batch), pending
  //    nowhere, never enqueued again; its id retires at once, free again after reuse_delay.
  for (auto id : transient_ids) registry_.retire(id, cycle);

  // 4. Stalled names carry their announcing ranks: warn or stop now.
  for (const auto& name : merged.stalled_names) {
    auto it = table_.find(name);
    auto* w = stall_.find(name);
    if (it == table_.end() || !w || w->warned) continue;
    w->warned = true;
    warn(name, it->second.front().spec, table_ranks(it->second));
  }
  for (const auto& name : merged.abort_names) {
    auto it = table_.find(name);
    if (it == table_.end()) continue;
    const auto& spec = it->second.front().spec;
    fatal.push_back(stall_message(spec, table_ranks(it->second), members(spec), options_, true));
  }

  // 5. Stalled ids need one more cycle for the ranks' reports; then restart the clocks.
  stall_.schedule(merged, agreed);
  dynamic_bitmap pending = merged.ready_or;
  pending.resize(registry_.size());
  pending.and_not(agreed);
  awaited_ = pending;
  awaited_.and_not(contributed_);
  awaited_.and_not(foreign_ids());  // this rank never enqueues those
  //    Ahead: something this rank contributed is still pending (some rank lacks it), and no
  //    rank has an id or a name this rank lacks.
  dynamic_bitmap waiting = pending_ids_;
  waiting.and_with(contributed_);
  bool waits = waiting.any(), behind = awaited_.any();
  for (const auto& [name, groups] : table_) {
    if (outsiders(groups.front().spec).test(static_cast<std::size_t>(rank_))) continue;  // not its set's
    bool here = table_ranks(groups).test(static_cast<std::size_t>(rank_));
    waits = waits || here;
    behind = behind || !here;
  }
  ahead_ = waits && !behind;
  std::vector<std::string> names;
  for (const auto& [name, groups] : table_) names.push_back(name);
  stall_.observe(pending, names, now);

  // 6. Agreed scalars.
  if (merged.score_min < std::numeric_limits<double>::infinity()) out.scores.push_back({cycle, merged.score_min});
  if (merged.shutdown && !out.shutdown_cycle) out.shutdown_cycle = cycle;
  resolve_window(merged, cycle, out);
  // 7. Join: once every rank has joined, name the last one and start over.
  if (merged.joined.count() == static_cast<std::size_t>(size_)) {
    int last = -1;
    for (int r = size_ - 1; r >= 0 && last < 0; --r)
      if (!joined_seen_.test(static_cast<std::size_t>(r))) last = r;
    out.join_done = join_agreed{cycle, last};
    joined_seen_ = {};
    joined_ = false;
    join_fresh_ = false;
  } else {
    joined_seen_ = merged.joined;
  }
  if (!fatal.empty()) {
    std::string text;
    for (const auto& f : fatal) text += (text.empty() ? "" : "; ") + f;
    fail(status{errc::timeout, std::move(text)}, out);
  }
}

void negotiation_ledger::resolve_window(const gossip_message& merged, uint64_t cycle, actions& out) {
  if (!merged.scored.any()) return;
  window_ranks_.or_with(merged.scored);
  window_min_ = std::min(window_min_, merged.score_min);
  for (const auto& g : merged.digests) {
    auto at = std::find_if(window_digests_.begin(), window_digests_.end(),
                           [&](const digest_group& x) { return x.digest == g.digest; });
    if (at == window_digests_.end()) {
      window_digests_.push_back(g);
    } else {
      at->ranks.or_with(g.ranks);
    }
  }
  dynamic_bitmap counted = window_ranks_;
  counted.or_with(merged.joined);  // a joined rank finishes no more windows
  if (counted.count() < static_cast<std::size_t>(size_)) return;
  std::sort(window_digests_.begin(), window_digests_.end(),
            [](const digest_group& x, const digest_group& y) { return x.ranks.count() > y.ranks.count() ||
                                                                      (x.ranks.count() == y.ranks.count() && x.digest < y.digest); });
  ++windows_agreed_;
  if (window_digests_.size() > 1) {
    // Every rank feeds its autotuner the same agreed scores, so the proposals must agree; a
    // rank that computed another one has a bug or another build. Name every group.
    std::string text = "autotune: ranks computed different proposals for window " + std::to_string(windows_agreed_) + ":";
    for (const auto& g : window_digests_) {
      char hex[24];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(g.digest));
      text += " " + format_ranks(g.ranks) + " digest " + hex + ";";
    }
    text.pop_back();
    fail(status{errc::protocol, std::move(text)}, out);
  } else {
    out.windows.push_back({cycle, windows_agreed_, window_min_});
  }
  window_ranks_ = {};
  window_min_ = std::numeric_limits<double>::infinity();
  window_digests_.clear();
}

std::optional<time_point> negotiation_ledger::next_deadline() const {
  if (failed_) return std::nullopt;
  return stall_.next_deadline();
}

void negotiation_ledger::fail(status error, actions& out) {
  if (failed_) return;
  failed_ = true;
  failure_ = error;
  out.fatal = std::move(error);
}

}  // namespace chorus::negotiation
