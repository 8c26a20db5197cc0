// Building chunk ops from chunk work and handing them to the data plane; the completion router.
#include "actors/chunk_runner.hpp"

#include <cstring>
#include <new>
#include <optional>
#include <string>

#include "actors/bucket_ranges.hpp"
#include "runtime/collectives/alltoall_op.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/collectives/exchange_op.hpp"
#include "runtime/collectives/hier_op.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/collectives/scatter_plan.hpp"
#include "runtime/collectives/wire_ring_op.hpp"
#include "runtime/core/tsan_edge.hpp"

namespace chorus {

void completion_router::wire(std::vector<caf::actor> senders) {
  std::lock_guard lk(mu_);
  senders_ = std::move(senders);
}

void completion_router::post(int stream, uint64_t sequence, const status& st, const bucket_job* job) {
  std::lock_guard lk(mu_);
  if (stream < 0 || static_cast<std::size_t>(stream) >= senders_.size()) return;
  tsan_edge::publish(job);  // the sender observes it on chunk_ran (actors/sender_actor.cpp)
  caf::anon_send(senders_[static_cast<std::size_t>(stream)], chunk_ran{sequence, st});
}

void completion_router::close() {
  std::lock_guard lk(mu_);
  senders_.clear();
}

namespace {
// a * b + c without wrapping; false when it does not fit (sizes announced by peers).
bool mul_add(std::size_t a, std::size_t b, std::size_t c, std::size_t& out) {
  std::size_t p = 0;
  return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(p, c, &out);
}

// Sizes the result buffer; a size no allocator can serve is an error naming the ranks' sizes.
status allocate_result(bucket_job& job, std::size_t bytes, const std::string& what) {
  try {
    job.gathered.assign(bytes, std::byte{0});
  } catch (const std::bad_alloc&) {
    return status{errc::protocol, describe(job.ops.front().spec) + ": cannot allocate " + std::to_string(bytes) +
                                      " bytes for the result of " + what};
  }
  return {};
}
}  // namespace

result<std::vector<std::size_t>> prepare_gather(bucket_job& job, int rank, int size) {
  const auto& spec = job.ops.front().spec;
  if (!job.local_error.ok()) return job.local_error;
  if (static_cast<int>(job.first_dims.size()) != size)
    return status{errc::internal, describe(spec) + ": " + std::to_string(job.first_dims.size()) +
                                      " gathered dims for " + std::to_string(size) + " ranks"};
  std::size_t elem = size_of(spec.type);
  std::size_t row_elems = elem ? job.row_bytes / elem : 0;
  std::vector<std::size_t> counts(static_cast<std::size_t>(size));
  std::size_t before = 0, total = 0;
  for (int r = 0; r < size; ++r) {
    int64_t d = job.first_dims[static_cast<std::size_t>(r)];
    if (d < 0)
      return status{errc::protocol, describe(spec) + ": rank " + std::to_string(r) + " announced dim 0 = " +
                                        std::to_string(d)};
    auto& c = counts[static_cast<std::size_t>(r)];
    std::size_t bytes = 0, next = 0;
    if (!mul_add(static_cast<std::size_t>(d), row_elems, 0, c) || !mul_add(c, elem, 0, bytes) ||
        !mul_add(total, 1, c, next) || !mul_add(next, elem, 0, bytes))
      return status{errc::protocol, describe(spec) + ": rank " + std::to_string(r) + " announced dim 0 = " +
                                        std::to_string(d) + ", too large for a buffer"};
    if (r < rank) before += c;
    total = next;
  }
  if (auto st = allocate_result(job, total * elem, "an allgather of dim 0 sizes announced by every rank"); !st.ok())
    return st;
  std::size_t mine = counts[static_cast<std::size_t>(rank)] * elem;
  if (mine) std::memcpy(job.gathered.data() + before * elem, job.ops.front().input, mine);
  return counts;
}

result<alltoall_layout> prepare_alltoall(bucket_job& job, int rank, int size) {
  const auto& spec = job.ops.front().spec;
  if (!job.local_error.ok()) return job.local_error;
  const auto n = static_cast<std::size_t>(size);
  if (job.first_dims.size() != n * n)
    return status{errc::internal, describe(spec) + ": " + std::to_string(job.first_dims.size()) +
                                      " exchanged splits for " + std::to_string(size) + " ranks"};
  alltoall_layout out;
  std::size_t sent = 0, received = 0;
  for (std::size_t j = 0; j < n; ++j) {
    int64_t to = job.first_dims[static_cast<std::size_t>(rank) * n + j], from = job.first_dims[j * n + rank];
    if (to < 0 || from < 0)
      return status{errc::protocol, describe(spec) + ": rank " + std::to_string(from < 0 ? j : rank) +
                                        " announced a negative split"};
    std::size_t to_bytes = 0, from_bytes = 0, sent_next = 0, received_next = 0;
    if (!mul_add(static_cast<std::size_t>(to), job.row_bytes, 0, to_bytes) ||
        !mul_add(static_cast<std::size_t>(from), job.row_bytes, 0, from_bytes) ||
        !mul_add(sent, 1, to_bytes, sent_next) || !mul_add(received, 1, from_bytes, received_next))
      return status{errc::protocol, describe(spec) + ": rank " + std::to_string(j) + " announced a split of " +
                                        std::to_string(from) + " rows, too large for a buffer"};
    out.send.push_back({sent, to_bytes});
    out.recv.push_back({received, from_bytes});
    sent = sent_next;
    received = received_next;
  }
  if (auto st = allocate_result(job, received, "an alltoall of splits announced by every rank"); !st.ok()) return st;
  return out;
}

void comm_runner::run(const chunk_work& w, int stream) {
  run_then(w, stream, [router = router_, stream, seq = w.sequence, job = w.job.get()](const status& st) {
    router->post(stream, seq, st, job);  // run_then's callback keeps the job alive meanwhile
  });
}

namespace {
// Compression or the NaN/Inf check asked for by the bucket's ops (the same for all of them:
// they are part of the fusion key), or nothing. Compression as the bucket runs it: none where
// CHORUS_COMPRESSION_SHM's policy dropped it (bucket_job::wire); then, with nothing else asked,
// the plain ring runs the chunk.
std::optional<wire_options> wire_of(const chunk_work& w) {
  if (!w.job || w.job->ops.empty()) return std::nullopt;
  const auto& spec = w.job->ops.front().spec;
  const compression wire = w.job->wire;
  if (wire == compression::none && spec.check == nan_check::off && spec.prescale == 1.0f) return std::nullopt;
  return wire_options{wire, spec.check != nan_check::off, spec.prescale, w.job->nonfinite};
}

// The compressed / checked ring for the chunks that carry the tensor's data; nullptr for the
// others (counts chunks, broadcast, alltoall), which run as usual.
std::unique_ptr<chunk_op> make_wire_op(const chunk_work& w, int stream, int rank, int size, std::size_t segment,
                                       const wire_options& o, std::function<void(const status&)>& done, bool& failed) {
  const std::size_t elem = size_of(w.type);
  switch (w.algo) {
    case chunk_algo::ring_allreduce:
    case chunk_algo::exchange_allreduce:  // small chunks too: the check and the casts live in the ring
      return make_wire_ring_allreduce(w.sequence, stream, rank, size, w.data, w.bytes / elem, w.type, w.op, segment, o);
    case chunk_algo::reducescatter: {
      const auto& job = *w.job;
      auto slices = split_rows(static_cast<std::size_t>(job.ops.front().spec.shape[0]), job.row_bytes, size);
      auto [offset, bytes] = job.chunk_ranges[w.sequence - job.first_sequence];
      return make_wire_ring_reducescatter(w.sequence, stream, rank, size, w.data, window_of(slices, {offset, bytes}),
                                          w.type, w.op, segment, o);
    }
    case chunk_algo::allgather_data: {
      auto counts = prepare_gather(*w.job, rank, size);
      if (!counts) {
        done(counts.error());
        failed = true;
        return nullptr;
      }
      return make_wire_ring_allgather(w.sequence, stream, rank, size, w.job->gathered.data(), *counts, w.type, segment,
                                      o);
    }
    default: return nullptr;
  }
}
}  // namespace

void comm_runner::run_then(const chunk_work& w, int stream, std::function<void(const status&)> done) {
  // A process set's bucket runs among its members, with member-local ranks (chunk_op::set_members).
  const bool in_set = w.job && w.job->members;
  const int rank = in_set ? w.job->group_rank : comm_.rank(), size = in_set ? w.job->group_size : comm_.size();
  const std::size_t segment = comm_.options().segment_bytes;
  const std::size_t elem = size_of(w.type);
  std::unique_ptr<chunk_op> op;
  if (auto o = wire_of(w)) {
    bool failed = false;
    op = make_wire_op(w, stream, rank, size, segment, *o, done, failed);
    if (failed) return;
    if (op) {
      if (in_set) op->set_members(w.job->members);
      comm_.plane().run_chunk(std::move(op), [keep = w.job, done = std::move(done)](const status& st) { done(st); });
      return;
    }
  }
  switch (w.algo) {
    case chunk_algo::mailbox_allreduce:
      if (auto* lane = comm_.pipeline_lane()) {
        std::vector<std::span<std::byte>> regions{{w.data, w.bytes}};
        if (w.job && w.job->fused()) {
          auto [offset, bytes] = w.job->chunk_ranges[w.sequence - w.job->first_sequence];
          regions = member_regions(*w.job, offset, offset + bytes);
        }
        // The NaN/Inf check rides in the mailboxes' fold (make_wire_op leaves this chunk to it).
        // (bucket_job::nonfinite exists only where the bucket's ops ask for the check).
        nonfinite_report* check = w.job ? w.job->nonfinite.get() : nullptr;
        lane->start(w.sequence, std::move(regions), w.type, w.op,
                    [keep = w.job, done = std::move(done)](const status& st) { done(st); }, check);
        return;
      }
      done(status{errc::internal, "chunk " + std::to_string(w.sequence) + " planned for the direct path of a "
                                                                              "communicator without one"});
      return;
    case chunk_algo::ring_allreduce:
      op = make_ring_allreduce(w.sequence, stream, rank, size, w.data, w.bytes / elem, w.type, w.op, segment);
      break;
    case chunk_algo::hier_sharded:
    case chunk_algo::hier_leader:
      op = make_hier_allreduce(w.sequence, stream, comm_.hosts(), rank, w.data, w.bytes / elem, w.type, w.op, segment,
                               w.algo == chunk_algo::hier_leader ? allreduce_choice::hier_leader
                                                                 : allreduce_choice::hier_sharded);
      break;
    case chunk_algo::exchange_allreduce:
      op = std::make_unique<exchange_op>(w.sequence, stream, rank, size, w.data, w.bytes / elem, w.type, w.op);
      break;
    case chunk_algo::broadcast:
      op = std::make_unique<broadcast_op>(w.sequence, stream, rank, size, w.data, w.bytes, w.root, segment);
      break;
    case chunk_algo::allgather_counts:
      op = make_ring_allgather(w.sequence, stream, rank, size, w.job->first_dims.data(),
                               std::vector<std::size_t>(static_cast<std::size_t>(size), 1), dtype::i64, segment);
      break;
    case chunk_algo::allgather_data:
    case chunk_algo::hier_allgather: {
      auto counts = prepare_gather(*w.job, rank, size);
      if (!counts) {
        done(counts.error());
        return;
      }
      if (w.algo == chunk_algo::allgather_data) {
        op = make_ring_allgather(w.sequence, stream, rank, size, w.job->gathered.data(), *counts, w.type, segment);
        break;
      }
      // Fusion chose the hierarchy only for the job's own set (job ranks), so the hosts' ranks
      // are the op's.
      std::vector<hier_block> blocks;
      for (const auto& b : slices_of(*counts, elem)) blocks.push_back({b.offset, b.length});
      op = make_hier_allgather(w.sequence, stream, comm_.hosts(), rank, w.job->gathered.data(), blocks, w.type,
                               segment);
      break;
    }
    case chunk_algo::reducescatter: {
      const auto& job = *w.job;
      auto slices = split_rows(static_cast<std::size_t>(job.ops.front().spec.shape[0]), job.row_bytes, size);
      auto [offset, bytes] = job.chunk_ranges[w.sequence - job.first_sequence];
      op = make_ring_reducescatter(w.sequence, stream, rank, size, w.data, window_of(slices, {offset, bytes}), w.type,
                                   w.op, segment);
      break;
    }
    case chunk_algo::alltoall_counts:
      op = make_ring_allgather(w.sequence, stream, rank, size, w.job->first_dims.data(),
                               std::vector<std::size_t>(static_cast<std::size_t>(size), static_cast<std::size_t>(size)),
                               dtype::i64, segment);
      break;
    case chunk_algo::alltoall_data: {
      auto layout = prepare_alltoall(*w.job, rank, size);
      if (!layout) {
        done(layout.error());
        return;
      }
      op = std::make_unique<alltoall_op>(w.sequence, stream, rank, size, w.job->ops.front().input,
                                         std::move(layout->send), w.job->gathered.data(), std::move(layout->recv),
                                         elem, segment);
      break;
    }
  }
  if (in_set) op->set_members(w.job->members);
  // The callback keeps the bucket (and so the buffer the op writes) alive until the data
  // plane lets go of the op, even if the pipeline has shut down by then.
  comm_.plane().run_chunk(std::move(op), [keep = w.job, done = std::move(done)](const status& st) { done(st); });
}

}  // namespace chorus
