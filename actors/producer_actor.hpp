// The producer: one per rank, owner of the table of enqueued operations (handle → request with
// its callback). Receives op_enqueued (ops_enqueued: several at once) from the API and
// op_finished from the negotiator and ops_finished from the completion actor; sends
// tensor_ready to the negotiator. It is the only place that calls an op's done callback, so "exactly once" is
// enforced here: a second op_finished for a handle finds nothing and is logged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/all.hpp>

#include "actors/op_request.hpp"
#include "actors/options.hpp"
#include "actors/protocol.hpp"
#include "runtime/process_sets/process_set.hpp"

namespace chorus {

struct producer_config {
  int rank = 0;
  int size = 1;
  /// The job's process sets; null: the global set only.
  std::shared_ptr<const process_set_table> process_sets;
};

struct producer_state {
  producer_config cfg;
  producer_wiring wired;
  std::unordered_map<uint64_t, std::shared_ptr<op_request>> table;
  std::unordered_set<std::string> names;  ///< names of the ops in `table`
  std::unordered_map<uint64_t, steady_time> enqueued_at;  ///< when each op in `table` arrived (telemetry)
  uint64_t next_handle = 1;               ///< 0 marks a joined rank's stand-in ops (never in `table`)
  /// join_enqueued callbacks waiting for join_finished (a second join while one is pending
  /// waits for the same outcome).
  std::vector<std::function<void(const status&, int)>> joins;
  bool draining = false;                  ///< shutdown in progress: new ops fail at once
  std::optional<caf::response_promise> drained;
  uint64_t completed = 0;                 ///< done callbacks called
  static inline const char* name = "chorus.producer";
};

/// Checks what one rank can check about a request before negotiation (kind, device, buffers,
/// spec); errc::invalid_argument naming the tensor and the rank.
/// `rank` and `size` are the job's; with `set` (a process set other than the global one,
/// including `rank`), alltoall splits and reducescatter slices count its members.
status check_request(const op_request& r, int rank, int size, const process_set* set = nullptr);

/// The op's process set as seen from job rank `rank`, or Horovod's error when the set is
/// unknown, leaves this rank out, or (broadcast) leaves the root out; CUDA tensors run in the
/// global set only. errc::invalid_argument naming the tensor and the rank.
result<std::shared_ptr<const process_set>> check_process_set(const tensor_spec& s, int rank,
                                                             const process_set_table* sets);

/// The op as the negotiator sees it; for allgather and alltoall shape[0] is replaced by 0
/// (ranks may contribute different numbers of rows) and the real dim 0 travels in first_dim.
op_ref make_op_ref(uint64_t handle, const op_request& r, steady_time at);

caf::behavior producer_actor(caf::stateful_actor<producer_state>* self, producer_config cfg);

}  // namespace chorus
