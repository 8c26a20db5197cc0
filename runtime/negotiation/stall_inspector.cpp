// Stall deadlines and the two-phase stall query (see the protocol in the header).
#include "runtime/negotiation/stall_inspector.hpp"

#include <algorithm>

namespace chorus::negotiation {

void stall_inspector::observe(const dynamic_bitmap& pending_ids, const std::vector<std::string>& pending_names,
                              time_point now) {
  std::map<uint32_t, watch> ids;
  pending_ids.for_each_set([&](std::size_t i) {
    auto id = static_cast<uint32_t>(i);
    auto it = ids_.find(id);
    ids.emplace(id, it != ids_.end() ? it->second : watch{now});
  });
  ids_ = std::move(ids);
  std::map<std::string, watch> names;
  for (const auto& n : pending_names) {
    auto it = names_.find(n);
    names.emplace(n, it != names_.end() ? it->second : watch{now});
  }
  names_ = std::move(names);
  // Requests for keys that are no longer pending are void.
  query_fresh_.and_with(pending_ids);
  abort_fresh_.and_with(pending_ids);
  std::erase_if(name_query_fresh_, [&](const std::string& n) { return !names_.count(n); });
  std::erase_if(name_abort_fresh_, [&](const std::string& n) { return !names_.count(n); });
}

bool stall_inspector::due(const watch& w, duration limit, time_point now) const {
  return limit > duration::zero() && now - w.since >= limit;
}

namespace {
void mark(dynamic_bitmap& fresh, uint32_t id) { fresh.set(id); }
void mark(std::set<std::string>& fresh, const std::string& name) { fresh.insert(name); }
}  // namespace

void stall_inspector::on_timer(time_point now) {
  // Ids and names alike: a watch due for its warning is queried once, one due for shutdown asks
  // once to stop the job.
  auto check = [&](auto& watches, auto& query_fresh, auto& abort_fresh) {
    for (auto& [key, w] : watches) {
      if (!w.warned && !w.queried && due(w, options_.stall_warning_time, now)) {
        w.queried = true;
        mark(query_fresh, key);
      }
      if (!w.abort_requested && due(w, options_.stall_shutdown_time, now)) {
        w.abort_requested = true;
        mark(abort_fresh, key);
      }
    }
  };
  check(ids_, query_fresh_, abort_fresh_);
  check(names_, name_query_fresh_, name_abort_fresh_);
}

std::optional<time_point> stall_inspector::next_deadline() const {
  std::optional<time_point> next;
  auto consider = [&](const watch& w) {
    auto take = [&](duration limit) {
      if (limit > duration::zero() && (!next || w.since + limit < *next)) next = w.since + limit;
    };
    if (!w.warned && !w.queried) take(options_.stall_warning_time);
    if (!w.abort_requested) take(options_.stall_shutdown_time);
  };
  for (const auto& [id, w] : ids_) consider(w);
  for (const auto& [name, w] : names_) consider(w);
  return next;
}

bool stall_inspector::has_new() const {
  return query_fresh_.any() || abort_fresh_.any() || !name_query_fresh_.empty() || !name_abort_fresh_.empty() ||
         report_due_.any();
}

void stall_inspector::contribute(gossip_message& m, const dynamic_bitmap& local_ids, int rank) {
  m.stall_query = query_fresh_;
  m.stall_abort = abort_fresh_;
  m.stalled_names.assign(name_query_fresh_.begin(), name_query_fresh_.end());
  m.abort_names.assign(name_abort_fresh_.begin(), name_abort_fresh_.end());
  query_fresh_.clear();
  abort_fresh_.clear();
  name_query_fresh_.clear();
  name_abort_fresh_.clear();
  report_due_.for_each_set([&](std::size_t id) {
    if (!local_ids.test(id)) return;
    stall_report r{static_cast<uint32_t>(id), {}};
    r.ranks.set(static_cast<std::size_t>(rank));
    m.reports.push_back(std::move(r));
  });
}

void stall_inspector::schedule(const gossip_message& merged, const dynamic_bitmap& agreed) {
  report_due_ = merged.stall_query;
  report_due_.resize(agreed.size());
  report_due_.for_each_set([&](std::size_t id) {
    auto* w = find(static_cast<uint32_t>(id));
    if (w && w->warned) report_due_.reset(id);
  });
  abort_due_ = merged.stall_abort;
  abort_due_.resize(agreed.size());
  report_due_.or_with(abort_due_);
  report_due_.and_not(agreed);
  abort_due_.and_not(agreed);
  // Every rank now knows these are being handled: nobody needs to ask again.
  report_due_.for_each_set([&](std::size_t id) {
    if (auto* w = find(static_cast<uint32_t>(id))) w->queried = true;
  });
  abort_due_.for_each_set([&](std::size_t id) {
    if (auto* w = find(static_cast<uint32_t>(id))) w->abort_requested = true;
  });
  query_fresh_.and_not(report_due_);
  abort_fresh_.and_not(abort_due_);
  for (const auto& n : merged.stalled_names) {
    if (auto* w = find(n)) w->queried = true;
    name_query_fresh_.erase(n);
  }
  for (const auto& n : merged.abort_names) {
    if (auto* w = find(n)) w->abort_requested = true;
    name_abort_fresh_.erase(n);
  }
}

stall_inspector::watch* stall_inspector::find(uint32_t id) {
  auto it = ids_.find(id);
  return it == ids_.end() ? nullptr : &it->second;
}

stall_inspector::watch* stall_inspector::find(const std::string& name) {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : &it->second;
}

}  // namespace chorus::negotiation
