// The process-wide Chorus session behind the C++ and C APIs: the job (communicator and
// pipeline) between init() and shutdown(), and the table of this rank's pending operations
// (for the unique-name check and so that shutdown can vouch that each one ended).
//
// Locks, outermost first: lifecycle_mu_ (init and shutdown, held while they run), job_mu_
// (shared by submit, exclusive only to install or remove the job; never held while the
// pipeline shuts down, so callbacks may submit), pending_mu_ (the table only).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "chorus/chorus.hpp"
#include "bindings/cpp/op_state.hpp"
#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus {
struct op_request;  // actors/pipeline.hpp
class process_set_table;  // runtime/process_sets/process_set.hpp
}  // namespace chorus

namespace chorus::detail {

class session {
 public:
  /// The one session of this process (never destroyed; shutdown() runs at exit).
  static session& instance();

  /// `process_sets`: the static sets (chorus.hpp: init), ids 1, 2, ... in order.
  status init(const std::vector<std::vector<int>>& process_sets = {});
  void shutdown();
  /// The job's process sets; null when not initialized.
  std::shared_ptr<process_set_table> process_sets();
  /// CHORUS_DYNAMIC_PROCESS_SETS of the job in force (false when not initialized).
  bool dynamic_process_sets() const { return dynamic_sets_.load(); }
  bool initialized() const { return size_.load() > 0; }
  int rank() const { return rank_.load(); }
  int size() const { return size_.load(); }
  int local_rank() const { return local_rank_.load(); }
  int local_size() const { return local_size_.load(); }
  /// The elastic round this job is (chorus.hpp: elastic_round); -1 outside an elastic job.
  int64_t elastic_round() const { return elastic_round_.load(); }
  /// The launcher's newest round (chorus.hpp: elastic_latest_round).
  result<int64_t> elastic_latest_round();
  /// The job's CHORUS_COMPRESSION and CHORUS_NAN_CHECK (none/off before init).
  compression default_wire() const { return static_cast<compression>(default_wire_.load()); }
  nan_check default_check() const { return static_cast<nan_check>(default_check_.load()); }

  /// Checks `op->spec` at the boundary and hands the operation to the pipeline, in place on
  /// `data` (allgather, alltoall and reducescatter only read it; reducescatter writes this
  /// rank's slice to `output`, alltoall sends `splits` rows to each rank). On rejection returns
  /// the error and leaves `op` as it was (not ended: the caller decides); otherwise `op` ends
  /// exactly once, later or already.
  status submit(const std::shared_ptr<op_state>& op, void* data, void* output = nullptr,
                std::vector<int64_t> splits = {});
  /// submit() for several in-place operations (allreduce, broadcast) at once: those accepted
  /// reach the pipeline in one message (pipeline::enqueue_all), so that ops ready together
  /// share a negotiation cycle. A rejected one ends here with its error; the others go on.
  void submit_all(const std::vector<std::shared_ptr<op_state>>& ops, const std::vector<void*>& data);
  /// Hands a join to the pipeline (pipeline::join); `op` ends exactly once, with
  /// op->last_rank set on success. On rejection (not initialized) returns the error.
  status join(const std::shared_ptr<op_state>& op);

  /// chorus::start_timeline / stop_timeline (chorus.hpp): a run-time trace recorder in the
  /// job's observer slot, on rank 0 only. Both take lifecycle_mu_ (serialized with init and
  /// shutdown); shutdown finishes a timeline still running.
  status start_timeline(const std::string& path, bool mark_cycles);
  /// chorus::settings (chorus.hpp): the last tunables the pipeline reported to the job's slot.
  result<settings_in_force> settings();
  status stop_timeline();

 private:
  struct job;
  session() = default;
  /// submit()'s checks and bookkeeping, under job_mu_ (shared) held by the caller with job_
  /// set: the request for the pipeline, or the rejection.
  status admit(const std::shared_ptr<op_state>& op, void* data, void* output, std::vector<int64_t> splits,
               op_request& r);
  /// The pipeline's done: leaves the pending table, then ends `op` (or, during shutdown,
  /// after the data plane closed: until then it may still write into the buffer).
  void finished(const std::shared_ptr<op_state>& op, const status& st, std::vector<std::byte> gathered,
                std::vector<int64_t> first_dims);
  /// Detaches and finishes the job's run-time timeline, if any (lifecycle_mu_ held).
  static status finish_timeline(job& j);

  std::mutex lifecycle_mu_;
  std::shared_mutex job_mu_;
  std::unique_ptr<job> job_;
  bool was_shut_down_ = false;  // guarded by job_mu_
  std::mutex pending_mu_;
  std::unordered_map<std::string, std::shared_ptr<op_state>> pending_;
  struct outcome {
    std::shared_ptr<op_state> op;
    status st;
    std::vector<std::byte> gathered;
    std::vector<int64_t> first_dims;
  };
  bool deferring_ = false;         // guarded by pending_mu_: shutdown in progress
  std::vector<outcome> deferred_;  // guarded by pending_mu_
  std::atomic<int> rank_{-1}, size_{-1}, local_rank_{-1}, local_size_{-1};
  std::atomic<uint8_t> default_wire_{0}, default_check_{0};
  std::atomic<bool> dynamic_sets_{false};
  std::atomic<bool> priority_{true};  // CHORUS_PRIORITY
  std::atomic<int64_t> elastic_round_{-1};
  int64_t elastic_attempted_ = -1;  // under lifecycle_mu_: the last round init() tried to join
};

}  // namespace chorus::detail
