// The process set table: registration, removal and look-up of sets of job ranks.
#include "runtime/process_sets/process_set.hpp"

#include <algorithm>

namespace chorus {

int process_set::local_rank(int job_rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), job_rank);
  return it != ranks.end() && *it == job_rank ? static_cast<int>(it - ranks.begin()) : -1;
}

std::string process_set::rank_list() const {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

result<std::vector<int>> normalize_ranks(std::vector<int> ranks, int world_size) {
  if (ranks.empty()) return status{errc::invalid_argument, "a process set needs at least one rank"};
  std::sort(ranks.begin(), ranks.end());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size)
      return status{errc::invalid_argument, "process set rank " + std::to_string(ranks[i]) +
                                                " outside the job's ranks 0-" + std::to_string(world_size - 1)};
    if (i && ranks[i] == ranks[i - 1])
      return status{errc::invalid_argument, "process set rank " + std::to_string(ranks[i]) + " given twice"};
  }
  return ranks;
}

process_set_table::process_set_table(int world_size) : world_size_(world_size) {
  auto global = std::make_shared<process_set>();
  for (int r = 0; r < world_size; ++r) global->ranks.push_back(r);
  sets_.emplace(0, std::move(global));
}

result<int> process_set_table::add(std::vector<int> ranks) {
  auto sorted = normalize_ranks(std::move(ranks), world_size_);
  if (!sorted) return sorted.error();
  std::lock_guard lk(mu_);
  for (const auto& [id, set] : sets_)
    if (set->ranks == *sorted)
      return status{errc::invalid_argument, "a process set of ranks " + set->rank_list() + " exists already (id " +
                                                std::to_string(id) + ")"};
  auto set = std::make_shared<process_set>();
  if (!free_ids_.empty()) {
    set->id = free_ids_.front();
    free_ids_.pop_front();
  } else {
    set->id = next_id_++;
  }
  set->ranks = std::move(*sorted);
  int id = set->id;
  sets_.emplace(id, std::move(set));
  return id;
}

status process_set_table::insert(int id, std::vector<int> ranks) {
  if (id <= 0) return {errc::invalid_argument, "process set id " + std::to_string(id) + " is not above 0"};
  auto sorted = normalize_ranks(std::move(ranks), world_size_);
  if (!sorted) return sorted.error();
  auto set = std::make_shared<process_set>();
  set->id = id;
  set->ranks = std::move(*sorted);
  std::lock_guard lk(mu_);
  if (sets_.count(id)) return {errc::invalid_argument, "process set id " + std::to_string(id) + " is taken"};
  sets_.emplace(id, std::move(set));
  std::erase(free_ids_, id);
  next_id_ = std::max(next_id_, id + 1);
  return {};
}

status process_set_table::remove(int id) {
  if (id == 0) return {errc::invalid_argument, "the global process set (id 0) cannot be removed"};
  std::lock_guard lk(mu_);
  if (!sets_.erase(id)) return {errc::invalid_argument, "process set " + std::to_string(id) + " does not exist"};
  free_ids_.push_back(id);
  return {};
}

std::shared_ptr<const process_set> process_set_table::find(int id) const {
  std::lock_guard lk(mu_);
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const process_set>> process_set_table::all() const {
  std::lock_guard lk(mu_);
  std::vector<std::shared_ptr<const process_set>> out;
  for (const auto& [id, set] : sets_) out.push_back(set);
  return out;
}

}  // namespace chorus
