// Chunking, sequence numbering and stream assignment of collectives (the blocking calls:
// communicator_blocking.cpp).
#include "runtime/collectives/communicator.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/collectives/alltoall_op.hpp"
#include "runtime/collectives/exchange_op.hpp"
#include "runtime/collectives/hier_op.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/collectives/scatter_plan.hpp"
#include "runtime/collectives/settings_check.hpp"
#include "runtime/core/log.hpp"
#include "runtime/fusion/fusion_plan.hpp"
#include "runtime/transport/mesh/mesh_transport.hpp"

namespace chorus {

collective_options collective_options::from_config(const collectives_config& c) {
  collective_options o{.chunk_bytes = c.chunk_bytes, .chunk_bytes_given = c.chunk_bytes_given,
                       .segment_bytes = c.segment_bytes, .small_bytes = c.small_bytes, .caller_bytes = c.caller_bytes,
                       .wire_on_shm = c.wire_on_shm, .job_wire = c.wire};
  parse_hier_mode(c.hierarchical, o.hierarchical);  // the reader allowed only known words
  return o;
}

result<std::unique_ptr<communicator>> communicator::without_link(result<connected_rank> r) {
  if (!r) return r.error();
  return std::move(r->comm);  // the control link, never started, closes its connections
}

result<std::unique_ptr<communicator>> communicator::create(const process_env& env) {
  auto cfg = read_config();
  if (!cfg) return cfg.error();
  return without_link(connect(env, *cfg));
}

result<std::unique_ptr<communicator>> communicator::create(const process_env& env, const config& cfg) {
  return without_link(connect(env, cfg));
}

result<std::unique_ptr<communicator>> communicator::create(const process_env& env, const mesh::mesh_options& mesh,
                                                           const collective_options& opts) {
  return without_link(connect(env, mesh, opts));
}

result<std::unique_ptr<communicator>> communicator::create(const process_env& env, std::unique_ptr<rendezvous> rdv,
                                                           const mesh::mesh_options& mesh,
                                                           const collective_options& opts) {
  return without_link(connect(env, std::move(rdv), mesh, opts));
}

result<connected_rank> communicator::connect(const process_env& env, const config& cfg) {
  auto opts = collective_options::from_config(cfg.collectives);
  opts.by_speed = cfg.pipeline.stream_placement == "speed";
  opts.chunks_in_flight = cfg.pipeline.chunks_in_flight;
  return connect(env, mesh::mesh_options::from_config(cfg.transport), opts);
}

result<connected_rank> communicator::connect(const process_env& env, const mesh::mesh_options& mesh,
                                             const collective_options& opts) {
  log::set_rank(env.rank);
  auto rdv = rendezvous::open(env);
  if (!rdv) return rdv.error();
  return connect(env, std::move(*rdv), mesh, opts);
}

result<connected_rank> communicator::connect(const process_env& env, std::unique_ptr<rendezvous> rdv,
                                             const mesh::mesh_options& mesh, const collective_options& opts) {
  auto mopts = mesh;
  mopts.scratch_bytes = std::max(mopts.scratch_bytes, opts.segment_bytes);
  process_env session = env;  // the data plane proves this attempt's id, not only the job's
  session.rank = rdv->rank();
  session.size = rdv->size();
  session.session_id = rdv->session_id();
  auto parts = mesh::connect_mesh(session, *rdv, mopts);
  if (!parts) return parts.error();
  if (auto st = agree_settings(*rdv, opts, mopts.connect_timeout); !st.ok()) return st;
  auto control = std::move(parts->control);
  return connected_rank{std::unique_ptr<communicator>(new communicator(std::move(rdv), std::move(*parts), opts)),
                        std::move(control)};
}

communicator::communicator(std::unique_ptr<rendezvous> rdv, mesh::mesh_parts parts, collective_options opts)
    : plane_(std::make_unique<data_plane>(std::move(rdv), std::make_unique<mesh::mesh_transport>(parts), parts.hosts)),
      compression_policy_(parts.lanes.entries, opts.wire_on_shm),
      opts_(opts) {
  opts_.chunk_bytes = chunk_bytes_in_force(opts_.chunk_bytes, opts_.chunk_bytes_given, hosts(), opts_.hierarchical);
  engine& runner = plane_->runner();
  auto& caller = parts.lanes.mailboxes(shm::mailbox_use::caller);
  auto& piped = parts.lanes.mailboxes(shm::mailbox_use::pipeline);
  if (caller.everywhere && piped.everywhere && opts_.caller_bytes > 0) {
    caller_mailboxes_ = std::make_unique<mailbox_allreduce>(parts.rank, parts.size, std::move(caller.out), std::move(caller.in),
                                                 opts_.caller_bytes, parts.options.shm_spin);
    pipeline_mailboxes_ = std::make_unique<mailbox_queue>(
        std::make_unique<mailbox_allreduce>(parts.rank, parts.size, std::move(piped.out), std::move(piped.in),
                                           opts_.caller_bytes, parts.options.shm_spin),
        [this](const status& st) { abort(st); });  // the peers learn why the job broke
    runner.on_failure([d = caller_mailboxes_.get(), q = pipeline_mailboxes_.get()](int peer, const status& why) {
      if (peer < 0) {
        d->interrupt(why);
        q->interrupt(why);
      } else {
        d->peer_left(peer, why);
        q->peer_left(peer, why);
      }
    });
  }
  if (opts_.by_speed) {
    board_ = plane_->speed_board();
    auto defer = [p = plane_.get()](std::function<void()> fn) { p->post(std::move(fn)); };
    const in_flight_window window{std::max<std::size_t>(opts_.chunks_in_flight, 1), opts_.chunk_bytes};
    scheduler_ = std::make_unique<chunk_scheduler>(runner, board_, window, std::move(defer));
  }
  plane_->start();
  // Once per job, on rank 0 (every rank decides alike): louder when the job's own default is
  // the compression being dropped.
  if (rank() == 0) {
    if (opts_.job_wire != compression::none && compression_policy_.drops_for_job())
      CHORUS_LOG(warn, "collectives", "CHORUS_COMPRESSION=" << name_of(opts_.job_wire) << ": " << compression_policy_.describe());
    else
      CHORUS_LOG(info, "collectives", compression_policy_.describe());
    if (caller_mailboxes_)
      CHORUS_LOG(info, "collectives",
                 (caller_mailboxes_->max_bytes() == SIZE_MAX ? std::string("every blocking allreduce")
                                                   : "blocking allreduces up to " +
                                                         std::to_string(caller_mailboxes_->max_bytes()) + " bytes")
                     << " run on the calling thread through shared-memory mailboxes; the pipeline's plain "
                        "allreduce chunks as large run on a thread of their own through mailboxes of their own");
  }
}

communicator::~communicator() { close(); }

uint64_t communicator::mailbox_sent(shm::mailbox_use use) const {
  if (use == shm::mailbox_use::caller) return caller_mailboxes_ ? caller_mailboxes_->sent_bytes() : 0;
  return pipeline_mailboxes_ ? pipeline_mailboxes_->sent_bytes() : 0;
}

void communicator::close() {
  if (closed_) return;
  closed_ = true;
  if (board_) CHORUS_LOG(info, "collectives", "stream rates at close: " << board_->describe());
  plane_->close();
  // After the I/O thread (its on_failure may still interrupt the lane until then).
  if (pipeline_mailboxes_) pipeline_mailboxes_->stop(status{errc::shutdown, "rank " + std::to_string(rank()) + " shut down"});
}

std::vector<communicator::chunk_plan> communicator::plan_chunks(std::size_t count, dtype t, std::size_t wire_unit,
                                                                std::size_t chunk_bytes) const {
  // Cut as the pipeline cuts its buckets (cut_chunks), over the bytes on the wire.
  const std::size_t unit = wire_unit ? wire_unit : size_of(t);
  std::vector<chunk_plan> out;
  for (const auto& r : cut_chunks(count * unit, chunk_bytes ? chunk_bytes : opts_.chunk_bytes, unit))
    out.push_back({r.offset / unit, r.bytes / unit});
  return out;
}

void communicator::launch(std::vector<chunk_job> jobs, callback done) {
  struct group {
    std::size_t left;
    status first_error;
    callback done;
  };
  auto shared = std::make_shared<std::vector<chunk_job>>(std::move(jobs));
  plane_->post([this, shared, done = std::move(done)]() mutable {
    auto g = std::make_shared<group>(group{shared->size(), {}, std::move(done)});
    auto each = [g](const status& st) {
      if (!st.ok() && g->first_error.ok()) g->first_error = st;
      if (--g->left == 0) g->done(g->first_error);
    };
    for (auto& j : *shared) {
      if (j.spec)
        j.make = [make = std::move(j.make), spec = j.spec](int stream) {
          auto op = make(stream);
          op->add_spec(spec);
          return op;
        };
      if (scheduler_) {
        scheduler_->submit(j.sequence, j.bytes, j.charge, std::move(j.make), each);
      } else {
        int stream = static_cast<int>(next_stream_++ % static_cast<uint32_t>(num_streams()));
        plane_->runner().run(j.make(stream), each);
      }
    }
  });
}

allreduce_choice communicator::choose(std::size_t bytes, allreduce_algorithm algo) const {
  switch (algo) {
    case allreduce_algorithm::ring: return allreduce_choice::ring;
    case allreduce_algorithm::recursive_doubling: return allreduce_choice::recursive_doubling;
    case allreduce_algorithm::flat: return choose_allreduce(hier_mode::off, hosts(), bytes, opts_.small_bytes);
    case allreduce_algorithm::hierarchical: return choose_allreduce(hier_mode::on, hosts(), bytes, opts_.small_bytes);
    case allreduce_algorithm::automatic: break;
  }
  return choose_allreduce(opts_.hierarchical, hosts(), bytes, opts_.small_bytes);
}

void communicator::allreduce_async(void* data, std::size_t count, dtype t, reduce_op op, callback done,
                                   allreduce_algorithm algo, uint64_t spec) {
  const allreduce_choice choice = choose(count * size_of(t), algo);
  auto* base = static_cast<std::byte*>(data);
  std::vector<chunk_job> jobs;
  const int r = rank(), n = size();
  const std::size_t segment = opts_.segment_bytes;
  // Sharded hierarchical chunks: finer, each holding part of a slot (hier_chunks).
  const hier_chunking cut =
      choice == allreduce_choice::hier_sharded ? hier_chunks(hosts(), opts_.chunk_bytes, size_of(t)) : hier_chunking{};
  for (auto& c : plan_chunks(count, t, 0, cut.bytes)) {
    uint64_t seq = next_sequence_++;
    void* chunk = base + c.offset * size_of(t);
    const std::size_t elems = c.count;
    jobs.push_back({seq, elems * size_of(t), [=, this](int stream) -> std::unique_ptr<chunk_op> {
                      if (choice == allreduce_choice::recursive_doubling)
                        return std::make_unique<exchange_op>(seq, stream, r, n, chunk, elems, t, op);
                      if (choice == allreduce_choice::hier_sharded || choice == allreduce_choice::hier_leader)
                        return make_hier_allreduce(seq, stream, hosts(), r, chunk, elems, t, op, segment, choice);
                      return make_ring_allreduce(seq, stream, r, n, chunk, elems, t, op, segment);
                    }, cut.charge, spec});
  }
  launch(std::move(jobs), std::move(done));
}

void communicator::allreduce_async(void* data, std::size_t count, dtype t, reduce_op op, const wire_options& asked,
                                   callback done, uint64_t spec) {
  wire_options wire = asked;
  wire.wire = compression_policy_.effective(asked.wire);
  if (wire.wire == compression::none && !wire.check && wire.prescale == 1.0f) {
    allreduce_async(data, count, t, op, std::move(done), allreduce_algorithm::automatic, spec);
    return;
  }
  auto* base = static_cast<std::byte*>(data);
  std::vector<chunk_job> jobs;
  const int r = rank(), n = size();
  const std::size_t segment = opts_.segment_bytes;
  // Chunks are cut, and placed on streams, by the bytes they put on the wire: compressed, a
  // chunk holds chunk_bytes of fp16/bf16 (twice the caller's elements), so the frames and the
  // per-chunk costs are those of the plain ring, and the stream board (which measures wire
  // bytes) compares like with like.
  const std::size_t unit = wire.wire != compression::none ? 2 : size_of(t);
  for (auto& c : plan_chunks(count, t, unit)) {
    uint64_t seq = next_sequence_++;
    void* chunk = base + c.offset * size_of(t);
    const std::size_t elems = c.count;
    jobs.push_back({seq, elems * unit, [=](int stream) -> std::unique_ptr<chunk_op> {
                      return make_wire_ring_allreduce(seq, stream, r, n, chunk, elems, t, op, segment, wire);
                    }, 0, spec});
  }
  launch(std::move(jobs), std::move(done));
}

void communicator::broadcast_async(void* data, std::size_t count, dtype t, int root, callback done, uint64_t spec) {
  if (root < 0 || root >= size()) {
    done(status{errc::invalid_argument, "broadcast: root rank " + std::to_string(root) + " is not in [0, " +
                                            std::to_string(size()) + ")"});
    return;
  }
  auto* base = static_cast<std::byte*>(data);
  std::vector<chunk_job> jobs;
  const int r = rank(), n = size();
  const std::size_t segment = opts_.segment_bytes;
  for (auto& c : plan_chunks(count, t)) {
    uint64_t seq = next_sequence_++;
    std::byte* chunk = base + c.offset * size_of(t);
    const std::size_t bytes = c.count * size_of(t);
    jobs.push_back({seq, bytes, [=](int stream) -> std::unique_ptr<chunk_op> {
                      return std::make_unique<broadcast_op>(seq, stream, r, n, chunk, bytes, root, segment);
                    }, 0, spec});
  }
  launch(std::move(jobs), std::move(done));
}

allgather_choice communicator::choose_allgather(allreduce_algorithm algo) const {
  const hier_mode mode = algo == allreduce_algorithm::hierarchical ? hier_mode::on
                         : algo == allreduce_algorithm::automatic  ? opts_.hierarchical
                                                                   : hier_mode::off;
  return chorus::choose_allgather(mode, hosts());
}

void communicator::allgather_async(const void* in, void* out, std::vector<std::size_t> counts, dtype t, callback done,
                                   allreduce_algorithm algo, uint64_t spec) {
  if (static_cast<int>(counts.size()) != size()) {
    done(status{errc::invalid_argument, "allgather: " + std::to_string(counts.size()) + " counts for " +
                                            std::to_string(size()) + " ranks"});
    return;
  }
  std::size_t e = size_of(t), before = 0;
  for (int r = 0; r < rank(); ++r) before += counts[r];
  auto* mine = static_cast<std::byte*>(out) + before * e;
  if (counts[rank()] && mine != in) std::memmove(mine, in, counts[rank()] * e);
  // One chunk per window of every rank's block (identical on every rank: same counts), so the
  // blocks go over every stream; each chunk pipelines its blocks by segments.
  const bool hier = choose_allgather(algo) == allgather_choice::hier;
  auto slices = slices_of(counts, e);
  std::vector<chunk_job> jobs;
  const int r = rank(), n = size();
  const std::size_t segment = opts_.segment_bytes;
  for (const auto& w : scatter_windows(slices, e, opts_.chunk_bytes, n)) {
    uint64_t seq = next_sequence_++;
    auto win = window_of(slices, w);
    std::size_t bytes = 0;
    for (const auto& b : win) bytes += b.length;
    jobs.push_back({seq, bytes, [=, this](int stream) -> std::unique_ptr<chunk_op> {
                      if (!hier) return make_ring_allgather(seq, stream, r, n, out, win, t, segment);
                      std::vector<hier_block> blocks;
                      for (const auto& b : win) blocks.push_back({b.offset, b.length});
                      return make_hier_allgather(seq, stream, hosts(), r, out, blocks, t, segment);
                    }, 0, spec});
  }
  launch(std::move(jobs), std::move(done));
}

void communicator::reducescatter_async(void* data, std::vector<std::size_t> counts, dtype t, reduce_op op,
                                       callback done, uint64_t spec) {
  if (static_cast<int>(counts.size()) != size()) {
    done(status{errc::invalid_argument, "reducescatter: " + std::to_string(counts.size()) + " counts for " +
                                            std::to_string(size()) + " ranks"});
    return;
  }
  auto slices = slices_of(counts, size_of(t));
  std::vector<chunk_job> jobs;
  const int r = rank(), n = size();
  const std::size_t segment = opts_.segment_bytes;
  for (const auto& w : scatter_windows(slices, size_of(t), opts_.chunk_bytes, size())) {
    uint64_t seq = next_sequence_++;
    jobs.push_back({seq, w.bytes * static_cast<std::size_t>(n), [=, win = window_of(slices, w)](int stream) {
                      return make_ring_reducescatter(seq, stream, r, n, data, win, t, op, segment);
                    }, 0, spec});
  }
  launch(std::move(jobs), std::move(done));
}

void communicator::alltoall_async(const void* in, std::vector<std::size_t> send_counts, void* out,
                                  std::vector<std::size_t> recv_counts, dtype t, callback done, uint64_t spec) {
  const auto me = static_cast<std::size_t>(rank());
  if (static_cast<int>(send_counts.size()) != size() || static_cast<int>(recv_counts.size()) != size() ||
      send_counts[me] != recv_counts[me]) {
    done(status{errc::invalid_argument,
                "alltoall: " + std::to_string(send_counts.size()) + " send counts and " +
                    std::to_string(recv_counts.size()) + " receive counts for " + std::to_string(size()) +
                    " ranks (the counts for this rank itself must agree)"});
    return;
  }
  uint64_t seq = next_sequence_++;
  std::size_t total = 0;
  for (auto c : send_counts) total += c * size_of(t);
  std::vector<chunk_job> jobs;
  jobs.push_back({seq, total,
                  [=, r = rank(), n = size(), segment = opts_.segment_bytes, send = slices_of(send_counts, size_of(t)),
                   recv = slices_of(recv_counts, size_of(t))](int stream) -> std::unique_ptr<chunk_op> {
                    return std::make_unique<alltoall_op>(seq, stream, r, n, in, send, out, recv, size_of(t), segment);
                  }, 0, spec});
  launch(std::move(jobs), std::move(done));
}

}  // namespace chorus
