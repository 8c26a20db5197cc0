// A group of ranks whose members issue the same collectives in the same order, as
// torch.distributed promises of a process group: its calls go straight to a data plane of its
// own (communicator: multi-stream TCP placed by speed, shared memory between the ranks of a
// host, the hierarchical algorithms across hosts), numbered in call order, with no negotiation.
// What torch does not promise is checked by the data plane itself: every call carries a digest of
// what must agree (kind, dtype, shape, op, root) in its frames' layout tag and in the mailboxes'
// call numbers, so members whose calls differ fail at once, naming the rank, instead of mixing
// bytes. The first failure (a mismatch, a dead or frozen peer, a call past the group's timeout)
// aborts the group: every pending call and every later one ends with that error.
// Point-to-point transfers are offered by the sender on the control link, matched on the
// receiver (runtime/collectives/p2p_matcher.hpp), and moved once the receiver said "ready",
// straight into its buffer.
// This layer knows nothing of torch: bindings/python/src/c10d/ maps a torch ProcessGroup onto it.
//
// Threads: a call may come from any thread; calls are issued in the order they take the group's
// lock. `done` runs exactly once: on the calling thread before the call returns (small
// allreduces that run on the caller's shared-memory path, and calls refused at once), else on the
// group's completion thread (completions.hpp), never on the data plane's threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "bindings/ordered/completions.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/collectives/p2p_matcher.hpp"
#include "runtime/config/config.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "telemetry/observer.hpp"

namespace chorus::ordered {

/// What one call is: for its name in errors and for the check that every member makes it alike.
struct call_info {
  std::string kind;   ///< torch's name of the collective: "all_reduce", "broadcast", ...
  std::string what;   ///< its tensors for messages: "float32[4, 3]"
  uint64_t spec = 0;  ///< digest of everything that must agree across members (spec_digest)
};

/// A digest of `parts` and then `more` (a shape): a call's spec (never 0).
uint64_t spec_digest(std::initializer_list<uint64_t> parts, std::span<const int64_t> more = {});

struct group_options {
  std::string name;                      ///< the framework's name of the group ("0", "default_pg")
  std::vector<int> global_ranks;         ///< job rank of each member; empty: member r is job rank r
  std::chrono::milliseconds timeout{1800000};  ///< a call pending longer aborts the group
  /// Allreduces up to this many bytes run on the calling thread where the caller's shared-memory
  /// path takes them (every member on one host).
  std::size_t inline_bytes = 64u << 10;
  /// A call pending this long makes the members compare, through the store, which call each is
  /// at (check_stall): a mismatch that left members waiting on different paths fails then,
  /// naming both calls, instead of at the timeout; members that are only late are logged.
  std::chrono::milliseconds stall_check{2000};
};

class ordered_group {
 public:
  using done_fn = std::function<void(const status&)>;
  /// A receive's end: the status and the rank the transfer came from.
  using recv_fn = std::function<void(const status&, int source)>;

  /// Builds the group's data plane over `rdv` (its rank and size are the group's), configured by
  /// `cfg` (the CHORUS_* variables) with env's secret, job id and host. Blocks until every member
  /// connected or the connect timeout passed.
  static result<std::unique_ptr<ordered_group>> create(std::unique_ptr<rendezvous> rdv, const process_env& env,
                                                       const config& cfg, group_options opts);
  /// close().
  ~ordered_group();
  /// Ends every pending call (errc::shutdown), says goodbye to the members, joins the threads;
  /// later calls end at once with the same error. Idempotent.
  void close();
  ordered_group(const ordered_group&) = delete;
  ordered_group& operator=(const ordered_group&) = delete;

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  const group_options& options() const { return opts_; }
  /// The group's collectives, and through them its data plane's counters.
  communicator& collectives() { return *comm_; }

  // Collectives, in the communicator's terms (counts in elements, in place where it says so).
  // Each returns the call's number in this group (1, 2, ...).
  uint64_t allreduce(const call_info& c, void* data, std::size_t count, dtype t, reduce_op op, done_fn done);
  uint64_t broadcast(const call_info& c, void* data, std::size_t count, dtype t, int root, done_fn done);
  uint64_t allgather(const call_info& c, const void* in, void* out, std::vector<std::size_t> counts, dtype t,
                     done_fn done);
  uint64_t reducescatter(const call_info& c, void* data, std::vector<std::size_t> counts, dtype t, reduce_op op,
                         done_fn done);
  uint64_t alltoall(const call_info& c, const void* in, std::vector<std::size_t> send_counts, void* out,
                    std::vector<std::size_t> recv_counts, dtype t, done_fn done);
  /// Ends once every member reached it and every earlier collective call of this member ended
  /// (not point-to-point ones, as Gloo).
  uint64_t barrier(const call_info& c, done_fn done);
  /// `bytes` of `data` to member `peer`, matched there by `tag`.
  uint64_t send(const call_info& c, const void* data, std::size_t bytes, int peer, int tag, done_fn done);
  /// `bytes` into `data` from member `peer` (-1: any member) with `tag`; the sender's length must
  /// be `bytes` (else both ends fail, naming both lengths).
  uint64_t recv(const call_info& c, void* data, std::size_t bytes, int peer, int tag, recv_fn done);

  /// Why the group broke (ok while healthy).
  status failure() const;
  /// Breaks the group with `why` (the first cause stands).
  void abort(const status& why);

 private:
  ordered_group(std::unique_ptr<communicator> comm, std::shared_ptr<tcp::control_link> link, const config& cfg,
                group_options opts);

  /// "c10d.all_reduce#17 (Float[4]) in process group '0' on rank 1 of 2"
  std::string name_of(const call_info& c, uint64_t seq) const;
  /// The same for call `seq` from the recent calls' table ("c10d call #17 ..." once its entry
  /// was reused).
  std::string name_of(uint64_t seq) const;
  /// A call's name, formatted only when needed (an error, a stall, a timeout): a call that ends
  /// well never pays for the text.
  struct call_name {
    const ordered_group* group = nullptr;
    uint64_t seq = 0;
    std::string kind;         // torch's name of the call, for telemetry
    std::size_t bytes = 0;    // of its tensors on this rank
    std::chrono::steady_clock::time_point started;
    std::string str() const { return group->name_of(seq); }
  };
  /// Reports the end of the call to telemetry (observer::on_call); any thread.
  void ended(const call_name& name, const status& st) const;
  /// `st` with the call's name in front (ok stays ok).
  status named(const std::string& name, const status& st) const;
  status named(const call_name& name, const status& st) const { return st.ok() ? st : named(name.str(), st); }
  /// Numbers the call and registers it as pending: under mu_.
  uint64_t begin(const call_info& c, std::size_t bytes, call_name& name);
  /// A group of one: call `seq` has nothing to move; it ends here, now (unlocking `lk`).
  template <class Lock>
  uint64_t alone(const call_name& name, Lock& lk, done_fn& done);
  /// A broken group ends call `seq` at once with its failure (true), else false.
  bool refused(uint64_t seq, const call_name& name, done_fn& done);
  /// The data plane's callback for call `seq`: hands the end to the completion thread.
  communicator::callback finisher(uint64_t seq, call_name name, done_fn done, bool after_earlier = false);
  struct pending_send {
    const void* data;
    std::size_t bytes;
    int peer;
    uint64_t call;
    call_name name;
    done_fn done;
  };
  struct pending_recv {
    void* data;
    std::size_t bytes;
    uint64_t call;
    call_name name;
    recv_fn done;
  };
  /// The completion thread's report of call `seq` pending for another stall_check.
  void check_stall(uint64_t seq, const std::string& name, uint64_t spec);
  void on_control(int peer, uint8_t kind, std::vector<uint8_t> data);
  void on_closed(int peer, const status& why, bool clean);
  /// Starts the matched receive (or refuses it).
  void start_receive(const p2p_match& m, pending_recv r);
  void fail_p2p(const status& why, int only_peer = -1);

  std::unique_ptr<communicator> comm_;
  std::shared_ptr<tcp::control_link> link_;
  group_options opts_;
  wire_options wire_;      // CHORUS_COMPRESSION / CHORUS_NAN_CHECK for allreduces (report per call)
  nan_check check_mode_ = nan_check::off;
  std::mutex mu_;          // issue order
  uint64_t next_call_ = 0;
  /// The latest calls' descriptions, by number modulo its size (under recent_mu_): names are
  /// formatted from here only when needed.
  static constexpr std::size_t recent_calls = 1024;
  struct recent_call {
    uint64_t seq = 0;
    call_info call;
  };
  mutable std::mutex recent_mu_;
  std::vector<recent_call> recent_ = std::vector<recent_call>(recent_calls);
  uint64_t next_lane_ = 0;
  mutable std::mutex state_mu_;
  status broken_;
  bool closed_ = false;
  std::mutex p2p_mu_;
  p2p_matcher matcher_;
  std::map<uint64_t, pending_send> sends_;  // by transfer sequence: offered, not yet told "ready"
  std::map<uint64_t, pending_recv> recvs_;  // by receive id: posted, not matched
  uint64_t next_transfer_ = 0;
  uint64_t next_receive_ = 0;
  std::shared_ptr<telemetry::observer> observer_;  // the process' (group_telemetry.hpp); may be null
  std::unique_ptr<completions> ends_;  // last: its thread may call abort() until it stops
};

}  // namespace chorus::ordered
