// The interface every negotiation strategy implements, as a pure, single-threaded state
// machine: events in (a local tensor became ready, a message arrived, a timer fired), actions
// out (messages to send, agreed ids, batches, errors, the next time to be woken). No I/O, no
// threads, no clock reads: the caller passes the time. The negotiator actor is a thin wrapper
// that forwards these; the scale simulator (simulator.hpp) drives N of them in one process.
// Thread-safety: none; one owner calls one instance.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/cycle_stats.hpp"
#include "runtime/negotiation/message.hpp"
#include "runtime/negotiation/registry.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "runtime/process_sets/process_set.hpp"

namespace chorus::negotiation {

/// Settings; must be equal on every rank (stall messages quote them).
struct negotiation_options {
  /// Lower bound between the starts of two cycles on one rank, except as early_start and
  /// start_bytes allow; a rank joining a cycle that another rank started ignores it
  /// (CHORUS_CYCLE_TIME_MS, alias HOROVOD_CYCLE_TIME).
  duration cycle_time = std::chrono::milliseconds(1);
  /// A tensor pending somewhere but not everywhere for this long gets one stall_warning
  /// naming the ranks that have not produced it; 0 = off (CHORUS_STALL_CHECK_TIME_SECONDS).
  duration stall_warning_time = std::chrono::seconds(60);
  /// After this long the job stops with that tensor's error on every rank; 0 = off
  /// (CHORUS_STALL_SHUTDOWN_TIME_SECONDS).
  duration stall_shutdown_time = duration::zero();
  /// Gossip (CHORUS_EARLY_START=1): a rank that caught up with what the others wait for
  /// starts a cycle at once instead of after cycle_time (negotiation_ledger::has_awaited), an
  /// exception to cycle_time's lower bound on spacing, so off unless asked for. Changes when a
  /// rank takes its snapshot, so trace replay, which hands each rank a cycle's ops together,
  /// runs without it.
  bool early_start = false;
  /// Gossip (CHORUS_HOLD_WHEN_AHEAD=1, the pipeline's default): a rank that is ahead (at the
  /// end of the last cycle it waited for other ranks, and no rank had anything it lacked)
  /// starts no cycle for new tensors of its own; it announces them when it joins the next
  /// cycle a peer starts, which the peers do when they catch up. A tensor can be agreed no
  /// earlier than the last rank has it, so holding costs no latency, and it saves the cycle
  /// the rank ahead would start for each new tensor only to hear that its peers lack it
  /// (negotiation_ledger::holds_back). Scores, shutdown, join and stall reports are never
  /// held. Off here so that the strategy tests and the simulator count cycles without it.
  bool hold_when_ahead = false;
  /// Gossip: a rank whose tensors new since its last contribution hold at least this many
  /// bytes (tensor_spec::byte_size: allgather and alltoall are negotiated without their first
  /// dimension, so they count 0) starts a cycle at once instead of after cycle_time
  /// (negotiation_ledger::fills_bucket), unless hold_when_ahead holds it back. The pipeline
  /// sets it to the fusion threshold: the cycle time is there to gather small tensors into one
  /// bucket, and once a bucket's worth waits, waiting longer only delays it. 0 = off (the
  /// strategy tests and the simulator count cycles without it). Trace replay runs without it,
  /// as without early_start.
  int64_t start_bytes = 0;
  /// The job's process sets (null: only the global one). A tensor of set k is negotiated by
  /// every rank, but only k's members enqueue it: the others count as having announced it
  /// and as ready for it (the ledger's contribution says so in the message, so every rank
  /// resolves alike), and the agreed batch names it on every rank (non-members plan it and
  /// skip its chunks). Every rank must have a set registered before any member enqueues a
  /// tensor in it.
  std::shared_ptr<const process_set_table> process_sets;
};

/// A message for rank `to`.
struct outgoing_message {
  int to = -1;
  gossip_message message;
};
/// A name got an id (a first registration, or a re-registration with another spec that
/// retires the name's previous id); identical on every rank, in the same order. The id may
/// have stood for another name before (registry.hpp: retired ids are handed out again).
struct id_assigned {
  std::string name;
  uint32_t id = 0;
  tensor_spec spec;
  uint64_t cycle = 0;  ///< the cycle at whose end it was assigned
};
/// The ids agreed ready on every rank in one cycle, identical on every rank: the registered
/// ones in increasing id order, then those assigned in that cycle, in name order. Look ids up
/// in registry() right after the call that reported them (an id retired later may be handed
/// out again). Only non-empty batches are reported.
struct agreed_batch {
  uint64_t cycle = 0;
  std::vector<uint32_t> ids;
};
/// The ranks announced `name` with different specs (errc::mismatch), or agreed an operation a
/// joined rank cannot take part in (errc::invalid_argument, diagnostics.hpp join_refusal): the
/// operation on that name ends with `code` and this text on every rank (the same text everywhere).
struct spec_error {
  uint64_t cycle = 0;
  std::string name;
  std::string message;
  errc code = errc::mismatch;
};
/// `name` has waited longer than stall_warning_time; reported once, identically on every rank.
struct stall_warning {
  uint64_t cycle = 0;
  std::string name;
  std::vector<int> missing_ranks;  ///< ranks that have not produced it
  std::string message;
};
/// A local enqueue refused at the boundary (only this rank): duplicate pending name, an
/// invalid spec, or the negotiation has stopped. (A registered name with another spec is not
/// refused: it is announced again and re-registered, see ledger.hpp.)
/// It refers to the local_ready() call that returned it, never to an earlier operation
/// still pending under the same name (that one goes on negotiating).
struct rejected_enqueue {
  std::string name;
  status error;
};
/// The min-merged autotuner score of a cycle in which some rank submitted one.
struct agreed_score {
  uint64_t cycle = 0;
  double score = 0;
};
/// The autotuner's window: every rank (joined ranks excepted) has submitted its score for
/// one more window since the last agreed one, in some cycle up to `cycle`; `score` is the
/// minimum of those scores. Identical on every rank, agreed in the same cycle. A rank's
/// autotuner submits its next window's score only after it learned this one (so window k's
/// score is the minimum of every rank's k-th score).
struct agreed_window {
  uint64_t cycle = 0;
  uint64_t window = 0;  ///< 1, 2, ... in agreement order
  double score = 0;
};
/// Every rank has joined (Horovod's join): agreed in cycle `cycle`, identically on every rank.
/// `last_rank` is the rank whose join arrived last (the highest of those that joined in the
/// final cycle when several did). Negotiation goes on as before afterwards.
struct join_agreed {
  uint64_t cycle = 0;
  int last_rank = -1;
};

/// The reports a call lists besides messages, ids and batches; the simulator's per-rank record
/// (simulator.hpp) gathers the same lists over a run.
struct report_lists {
  std::vector<spec_error> errors;
  std::vector<stall_warning> warnings;
  std::vector<rejected_enqueue> rejected;
  std::vector<agreed_score> scores;
  std::vector<agreed_window> windows;
  std::vector<cycle_stats> cycles;
};

/// Everything a call produced. Consumers handle, in this order: `assigned`, `errors`,
/// `batches` (a batch may name ids assigned in the same call), then the rest.
struct actions : report_lists {
  std::vector<outgoing_message> send;
  std::vector<id_assigned> assigned;
  std::vector<agreed_batch> batches;
  std::optional<uint64_t> shutdown_cycle;  ///< the cycle in which a shutdown request was agreed
  std::optional<join_agreed> join_done;     ///< the cycle in which the last rank joined
  /// The job must stop (stall shutdown, protocol violation); same text on every rank for a
  /// stall. After a fatal action the strategy ignores messages and rejects enqueues.
  std::optional<status> fatal;
  /// Call on_timer() at this time (cycle time lower bound, stall deadlines, central polls).
  /// Every call returns the complete current answer: it replaces earlier ones, and none
  /// means no timer is needed now.
  std::optional<time_point> wake_at;
};

class negotiation_strategy {
 public:
  virtual ~negotiation_strategy() = default;
  /// A local operation on `spec.name` is ready to be reduced.
  virtual actions local_ready(tensor_spec spec, time_point now) = 0;
  /// Several local operations ready at once: local_ready() for each, in order, except that
  /// no cycle starts before all of them are in, so a cycle that starts takes them all.
  virtual actions local_ready_all(std::vector<tensor_spec> specs, time_point now) = 0;
  /// A message from a peer, in any order relative to others.
  virtual actions on_message(const gossip_message& message, time_point now) = 0;
  /// The time asked for in wake_at has come (calling it earlier or more often is harmless).
  virtual actions on_timer(time_point now) = 0;
  /// Contributes this rank's autotuner window score to the next cycle (min-merged), with the
  /// digest of the proposal its autotuner computed so far. When every rank has submitted one,
  /// actions::windows reports the agreed window; if the digests differ, negotiation stops with
  /// errc::protocol naming the ranks of each digest (a rank computed another proposal).
  virtual actions submit_score(double score, uint64_t digest, time_point now) = 0;
  /// The autotuner switched the knobs that time cycles: the cycle time and the fusion threshold
  /// (negotiation_options::start_bytes follows it). Local timing bounds: ranks may differ briefly.
  virtual void set_timing(duration cycle_time, int64_t start_bytes) = 0;
  /// Asks every rank to shut down; agreed in the next cycle (actions::shutdown_cycle).
  virtual actions request_shutdown(time_point now) = 0;
  /// This rank joins (Horovod's join, for uneven inputs). From the next cycle on it counts as
  /// ready for every tensor the other ranks agree on, names it never announced included
  /// (its caller contributes neutral data for them), until every rank has joined; then
  /// actions::join_done reports the last rank to join, on every rank in the same cycle.
  /// A second call before that is harmless.
  virtual actions request_join(time_point now) = 0;
  /// True from request_join() until join_done.
  virtual bool joined() const = 0;

  /// Not in a cycle and nothing new to contribute.
  virtual bool idle() const = 0;
  /// Cycles this rank has finished.
  virtual uint64_t cycles_done() const = 0;
  /// The cycle whose contribution a tensor made ready now joins: cycles_done() + 1, or + 2
  /// while this rank's contribution to cycle cycles_done() + 1 is already taken (it is in
  /// that cycle). The first cycle that can agree the tensor; traces record it for replay.
  virtual uint64_t contribution_cycle() const = 0;
  virtual const tensor_registry& registry() const = 0;
  virtual std::string_view strategy_name() const = 0;
};

/// "gossip" or "central" (CHORUS_NEGOTIATION); errc::config for anything else, or for a
/// rank outside [0, size).
result<std::unique_ptr<negotiation_strategy>> make_strategy(std::string_view name, int rank, int size,
                                                            const negotiation_options& options);

/// ceil(log2(size)): dissemination rounds per gossip cycle (0 for size 1).
int gossip_rounds(int size);

}  // namespace chorus::negotiation
