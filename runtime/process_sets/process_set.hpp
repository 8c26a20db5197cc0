// Process sets (Horovod's): a sorted list of job ranks with an id, 0 being every rank of the
// job. A set's collectives run among its members only; its tensors negotiate under names of
// their own (tensor_spec.hpp: negotiated_name). The table is shared by the API (add, remove,
// look up), the negotiation (which ranks a tensor's set leaves out) and the data plane
// (member-local ranks to job ranks). Thread-safety: process_set values are immutable;
// process_set_table may be used from any thread.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus {

struct process_set {
  int id = 0;
  std::vector<int> ranks;  ///< job ranks, ascending, no duplicates

  int size() const { return static_cast<int>(ranks.size()); }
  /// The member-local rank of job rank `job_rank`; -1 when it is not a member.
  int local_rank(int job_rank) const;
  bool includes(int job_rank) const { return local_rank(job_rank) >= 0; }
  /// "0,2,3"
  std::string rank_list() const;
};

/// `ranks` sorted, or errc::invalid_argument when empty, a rank lies outside [0, world_size) or
/// appears twice (naming it).
result<std::vector<int>> normalize_ranks(std::vector<int> ranks, int world_size);

class process_set_table {
 public:
  /// Holds the global set (id 0, every rank).
  explicit process_set_table(int world_size);

  int world_size() const { return world_size_; }
  /// Registers a set of `ranks` (normalize_ranks) under the next id: a freed id first (the
  /// oldest freed), else one above every id used so far. Every rank that makes the same adds and
  /// removes in the same order gets the same ids. A set with the same ranks already registered:
  /// errc::invalid_argument naming its id.
  result<int> add(std::vector<int> ranks);
  /// Registers `ranks` under id `id` (> 0): trace replay rebuilds a recorded job's sets. A
  /// taken id or bad ranks: errc::invalid_argument.
  status insert(int id, std::vector<int> ranks);
  /// Forgets set `id`. The global set and unknown ids: errc::invalid_argument.
  status remove(int id);
  /// The set, or null when `id` is not registered.
  std::shared_ptr<const process_set> find(int id) const;
  /// Every registered set, by id (the global set first).
  std::vector<std::shared_ptr<const process_set>> all() const;

 private:
  int world_size_;
  mutable std::mutex mu_;
  std::map<int, std::shared_ptr<const process_set>> sets_;
  std::deque<int> free_ids_;
  int next_id_ = 1;
};

}  // namespace chorus
