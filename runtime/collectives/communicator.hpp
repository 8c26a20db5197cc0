// A job's collectives over its data plane (data_plane.hpp): the entry point for the runtime's
// users (the pipeline's senders, the benchmarks, the tests). Cuts a buffer into chunks, gives
// each chunk a sequence number (identical on every rank when all ranks make the same calls in
// the same order), spreads chunks over the streams and runs them as chunk ops on the I/O thread.
// Thread-safety: the *_async calls may come from any thread; calls from several threads at
// once must be ordered by the caller identically on every rank.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/collectives/chunk_scheduler.hpp"
#include "runtime/collectives/chunk_size.hpp"
#include "runtime/collectives/compression_policy.hpp"
#include "runtime/collectives/data_plane.hpp"
#include "runtime/collectives/hier_allgather.hpp"
#include "runtime/collectives/hier_schedule.hpp"
#include "runtime/collectives/mailbox_allreduce.hpp"
#include "runtime/collectives/mailbox_queue.hpp"
#include "runtime/collectives/stream_board.hpp"
#include "runtime/collectives/wire_ring_op.hpp"
#include "runtime/config/defaults.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/mesh/mesh_connect.hpp"
#include "runtime/transport/tcp/control_link.hpp"

namespace chorus {

struct collective_options {
  std::size_t chunk_bytes = default_chunk_bytes;  ///< CHORUS_CHUNK_BYTES: unit of work per stream
  bool chunk_bytes_given = true;  ///< false: chunk_bytes is the default, lowered across hosts (chunk_size.hpp)
  std::size_t segment_bytes = 512u << 10;  ///< CHORUS_SEGMENT_BYTES: pipelining unit inside a chunk
  std::size_t small_bytes = 64u << 10;     ///< CHORUS_SMALL_ALLREDUCE_BYTES: recursive doubling up to this
  /// CHORUS_CALLER_ALLREDUCE_BYTES: with every rank on one host, which blocking allreduces run
  /// on the calling thread (mailbox_allreduce::takes); 0: none.
  std::size_t caller_bytes = 4u << 20;
  /// CHORUS_STREAM_PLACEMENT=speed: chunks start on the stream expected to finish them first
  /// (chunk_scheduler.hpp), within chunks_in_flight × chunk_bytes per stream; false: round-robin,
  /// all at once.
  bool by_speed = true;
  std::size_t chunks_in_flight = 2;        ///< CHORUS_CHUNKS_IN_FLIGHT (with by_speed)
  hier_mode hierarchical = hier_mode::automatic;  ///< CHORUS_HIERARCHICAL (hier_schedule.hpp)
  /// CHORUS_COMPRESSION_SHM: whether compressed allreduces among ranks that all share memory
  /// run uncompressed (compression_policy, runtime/collectives/compression_policy.hpp).
  shm_compression wire_on_shm = shm_compression::automatic;
  /// CHORUS_COMPRESSION, the job's default: only for the init log (warn when the policy drops it).
  compression job_wire = compression::none;
  /// The configured values (runtime/config).
  static collective_options from_config(const collectives_config& c);
};

/// automatic: choose_allreduce (hier_schedule.hpp) under CHORUS_HIERARCHICAL; flat and
/// hierarchical: the same choice with the hierarchy forced off or on.
enum class allreduce_algorithm { automatic, ring, recursive_doubling, flat, hierarchical };

class communicator;

/// A connected rank: its collectives, and the control link that connect_mesh built beside the
/// data plane (mesh_parts::control), for whoever carries control messages.
struct connected_rank {
  std::unique_ptr<communicator> comm;
  std::shared_ptr<tcp::control_link> control;
};

class communicator {
 public:
  using callback = std::function<void(const status&)>;

  /// Rendezvous, mesh (data plane and control link) and I/O thread, configured by `cfg`.
  static result<connected_rank> connect(const process_env& env, const config& cfg);
  static result<connected_rank> connect(const process_env& env, const mesh::mesh_options& mesh,
                                        const collective_options& opts);
  /// The same over a rendezvous opened by the caller (a process group's store: its rank and
  /// size are rdv's, env gives the rest: secret, job id, host, timeouts).
  static result<connected_rank> connect(const process_env& env, std::unique_ptr<rendezvous> rdv,
                                        const mesh::mesh_options& mesh, const collective_options& opts);
  /// The same as connect, for a rank that needs no control link (collectives only), configured
  /// by read_config() (the CHORUS_* environment).
  static result<std::unique_ptr<communicator>> create(const process_env& env);
  /// The same with configuration read by the caller.
  static result<std::unique_ptr<communicator>> create(const process_env& env, const config& cfg);
  static result<std::unique_ptr<communicator>> create(const process_env& env, const mesh::mesh_options& mesh,
                                                      const collective_options& opts);
  /// The same over a rendezvous opened by the caller (a process group's store: its rank and
  /// size are rdv's, env gives the rest: secret, job id, host, timeouts).
  static result<std::unique_ptr<communicator>> create(const process_env& env, std::unique_ptr<rendezvous> rdv,
                                                      const mesh::mesh_options& mesh, const collective_options& opts);
  ~communicator();

  int rank() const { return plane_->rank(); }
  int size() const { return plane_->size(); }
  int num_streams() const { return plane_->num_streams(); }
  const collective_options& options() const { return opts_; }
  /// The ranks grouped by host (data_plane::hosts).
  const host_groups& hosts() const { return plane_->hosts(); }
  /// Whether an op among given ranks keeps the compression it asked for (CHORUS_COMPRESSION_SHM),
  /// built from every rank's link entry at connect: identical on every rank.
  const compression_policy& wire_compression() const { return compression_policy_; }
  /// What allreduce_async runs for a buffer of `bytes` under `algo`.
  allreduce_choice choose(std::size_t bytes, allreduce_algorithm algo) const;
  /// The data plane under these collectives: run_chunk, abort, the counters, the store.
  data_plane& plane() { return *plane_; }
  const data_plane& plane() const { return *plane_; }
  /// Payload bytes the shared-memory mailboxes of `use` carried to the peers so far (the
  /// caller's path and the pipeline's, which no stream counts); 0 without them.
  /// Any thread.
  uint64_t mailbox_sent(shm::mailbox_use use) const;

  /// In place. `done` runs exactly once, on the I/O thread; buffers stay untouched by the
  /// caller until then.
  /// `spec` (here and below): the caller's digest of what the call is beyond its byte count
  /// (shape, dtype, ...), mixed into every frame's layout tag (chunk_op::add_spec), so that
  /// ranks that make different calls of the same size fail instead of mixing their bytes; 0:
  /// none.
  void allreduce_async(void* data, std::size_t count, dtype t, reduce_op op, callback done,
                       allreduce_algorithm algo = allreduce_algorithm::automatic, uint64_t spec = 0);
  /// allreduce_async over the compressed and/or checked ring (wire_ring_op.hpp) for every chunk,
  /// small ones too: `wire` as there (compression: f32/f64 with sum or average only). Compression
  /// goes through wire_compression() first: where it drops it and nothing else is asked for, this is the
  /// plain allreduce_async above (automatic algorithm), bit for bit.
  void allreduce_async(void* data, std::size_t count, dtype t, reduce_op op, const wire_options& wire, callback done,
                       uint64_t spec = 0);
  void broadcast_async(void* data, std::size_t count, dtype t, int root, callback done, uint64_t spec = 0);
  /// `out` receives counts[r] elements from each rank r, in rank order; `in` holds counts[rank()].
  /// Counts identical on every rank. Cut into chunks that each move a window of every rank's
  /// block (scatter_plan.hpp), spread over the streams; each chunk runs the flat ring or the
  /// hierarchical allgather (hier_allgather.hpp) as choose_allgather() says: `algo` flat or
  /// hierarchical forces the hierarchy off or on, anything else leaves it to CHORUS_HIERARCHICAL.
  void allgather_async(const void* in, void* out, std::vector<std::size_t> counts, dtype t, callback done,
                       allreduce_algorithm algo = allreduce_algorithm::automatic, uint64_t spec = 0);
  /// What allgather_async runs under `algo`.
  allgather_choice choose_allgather(allreduce_algorithm algo) const;
  /// Reduce-scatter in place: `data` holds counts[r] elements for each rank r, in rank order
  /// (counts identical on every rank). Every slice serves as scratch; at the end ours (at
  /// element sum(counts[0..rank()))) holds the reduction over all ranks (average: divided by
  /// size()). Cut into chunks that each move a window of every slice, spread over the streams.
  void reducescatter_async(void* data, std::vector<std::size_t> counts, dtype t, reduce_op op, callback done,
                           uint64_t spec = 0);
  /// Sends send_counts[i] elements of `in` (consecutive, rank order) to rank i, and receives
  /// recv_counts[j] elements from rank j into `out` (consecutive, rank order). recv_counts[j]
  /// must be rank j's send_counts[rank()]; where it is not, the receiver fails with
  /// errc::protocol. One chunk, pipelined by segments.
  void alltoall_async(const void* in, std::vector<std::size_t> send_counts, void* out,
                      std::vector<std::size_t> recv_counts, dtype t, callback done, uint64_t spec = 0);

  /// Blocking. With every rank on one host (mailboxes between all pairs) and the automatic
  /// algorithm, a buffer within options().caller_bytes (mailbox_allreduce::takes) runs on the calling thread
  /// (mailbox_allreduce.hpp) instead of the I/O thread; everything else waits for allreduce_async.
  status allreduce(void* data, std::size_t count, dtype t, reduce_op op,
                   allreduce_algorithm algo = allreduce_algorithm::automatic, uint64_t spec = 0);
  /// Whether a blocking allreduce of `bytes` under `algo` runs on the calling thread.
  bool runs_on_caller(std::size_t bytes, dtype t, reduce_op op,
                      allreduce_algorithm algo = allreduce_algorithm::automatic) const {
    return caller_mailboxes_ && algo == allreduce_algorithm::automatic && caller_mailboxes_->takes(bytes, t, op);
  }
  /// Blocking allreduce_async with `wire`. Where wire_compression() drops the compression and
  /// no prescale is asked, it runs on the calling thread as the plain one above would, the
  /// NaN/Inf check inside the mailboxes' fold (mailbox_allreduce::run).
  status allreduce(void* data, std::size_t count, dtype t, reduce_op op, const wire_options& wire);
  /// With every rank on one host (the pipeline's mailboxes between all pairs) and
  /// options().caller_bytes > 0: the thread that runs the pipeline's plain allreduce chunks in
  /// hand-out order (mailbox_queue.hpp); null otherwise. It lives until close().
  mailbox_queue* pipeline_lane() { return pipeline_mailboxes_.get(); }
  status broadcast(void* data, std::size_t count, dtype t, int root);
  status allgather(const void* in, void* out, std::vector<std::size_t> counts, dtype t,
                   allreduce_algorithm algo = allreduce_algorithm::automatic);
  status reducescatter(void* data, std::vector<std::size_t> counts, dtype t, reduce_op op);
  status alltoall(const void* in, std::vector<std::size_t> send_counts, void* out,
                  std::vector<std::size_t> recv_counts, dtype t);
  status barrier();

  /// Fails what is pending with errc::shutdown, says goodbye to the peers, stops the I/O thread.
  void close();
  /// Breaks the data plane because the job is broken (data_plane::abort).
  void abort(const status& why) { plane_->abort(why); }

 private:
  communicator(std::unique_ptr<rendezvous> rdv, mesh::mesh_parts parts, collective_options opts);
  static result<std::unique_ptr<communicator>> without_link(result<connected_rank> r);
  /// The blocking allreduce on the calling thread (runs_on_caller), `check` as mailbox_allreduce::run.
  status allreduce_on_caller(void* data, std::size_t count, dtype t, reduce_op op, uint64_t spec,
                             nonfinite_report* check);
  struct chunk_plan {
    std::size_t offset;  // elements
    std::size_t count;
  };
  /// Chunks of about `chunk_bytes` (0: options().chunk_bytes) on the wire: `wire_unit` bytes per
  /// element there (0: the dtype's size; 2 when compressed to fp16/bf16).
  std::vector<chunk_plan> plan_chunks(std::size_t count, dtype t, std::size_t wire_unit = 0,
                                      std::size_t chunk_bytes = 0) const;
  /// One chunk of a collective: its op is built when it starts, on the stream it gets.
  struct chunk_job {
    uint64_t sequence;
    std::size_t bytes;
    std::function<std::unique_ptr<chunk_op>(int stream)> make;
    /// Bytes of its stream's window it holds (chunk_scheduler::submit; 0: a whole slot).
    std::size_t charge = 0;
    uint64_t spec = 0;  ///< mixed into the op's layout tag (chunk_op::add_spec)
  };
  /// Runs the chunks on the I/O thread (by speed or round-robin); `done` once, after the last,
  /// with the first error.
  void launch(std::vector<chunk_job> jobs, callback done);
  static status wait(const std::function<void(callback)>& start);

  std::unique_ptr<data_plane> plane_;
  compression_policy compression_policy_;
  std::unique_ptr<mailbox_allreduce> caller_mailboxes_;  // null unless every pair of ranks has mailboxes
  std::unique_ptr<mailbox_queue> pipeline_mailboxes_;         // the pipeline's; null as caller_mailboxes_
  collective_options opts_;
  std::atomic<uint64_t> next_sequence_{1};
  uint32_t next_stream_ = 0;                    // round-robin (I/O thread)
  std::shared_ptr<stream_board> board_;         // by_speed: rates and loads of the streams
  std::unique_ptr<chunk_scheduler> scheduler_;  // by_speed (I/O thread)
  bool closed_ = false;
};

}  // namespace chorus
