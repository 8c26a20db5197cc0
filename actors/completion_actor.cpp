// The completion actor: counts chunks per bucket, unpacks, ends ops, moves the start window.
#include "actors/completion_actor.hpp"

#include "actors/bucket_ranges.hpp"
#include "actors/join_filler.hpp"

#include <cstring>
#include <string>

#include "runtime/collectives/scatter_plan.hpp"
#include "runtime/collectives/wire_ring_op.hpp"
#include "runtime/core/log.hpp"
#include "runtime/tuning/window_meter.hpp"

namespace chorus {

namespace {

using self_ptr = caf::stateful_actor<completion_state>*;

/// Adds `op`'s end to `out` (sent to the producer once the bucket's ops are all in it).
void end_op(self_ptr self, ops_finished& out, const op_ref& op, const status& st, std::vector<std::byte> gathered = {},
            std::vector<int64_t> dims = {}) {
  auto& s = self->state;
  if (is_join_filler(op)) return;  // a joined rank's stand-in: nobody waits for it
  if (st.ok()) {
    ++s.ops_ok;
    out.ops.push_back(op_finished{op.handle, st, std::move(gathered), std::move(dims)});
    return;
  }
  ++s.ops_failed;
  status named{st.code(), describe(op.spec) + " on rank " + std::to_string(s.cfg.rank) + ": " + st.message()};
  out.ops.push_back(op_finished{op.handle, std::move(named), {}, {}});
}

/// Copies one ended chunk of a fused bucket out to the ops' tensors (overlapping the
/// transfer of the bucket's other chunks).
void unpack_chunk(completion_state::entry& e, uint64_t sequence) {
  auto& job = *e.job;
  auto index = sequence - job.first_sequence;
  if (index >= job.chunk_ranges.size()) {
    e.error = {errc::internal, "sequence " + std::to_string(sequence) + " is not a chunk of bucket " + std::to_string(job.id)};
    return;
  }
  auto [offset, bytes] = job.chunk_ranges[index];
  auto st = unpack_range(job, offset, offset + bytes);
  if (!st.ok()) e.error = {errc::internal, "unpacking the fusion buffer failed: " + st.message()};
}

/// Column `rank` of an alltoall's splits matrix: the rows received from each rank.
std::vector<int64_t> received_splits(const bucket_job& job, int rank, int size) {
  std::vector<int64_t> out;
  auto n = static_cast<std::size_t>(size);
  for (std::size_t j = 0; j < n; ++j) out.push_back(job.first_dims[j * n + static_cast<std::size_t>(rank)]);
  return out;
}

/// The NaN/Inf check's verdict on a finished bucket, the same on every rank (the ranks come
/// from the rings' flag exchange): `error` turns it into an error naming the tensors and the
/// ranks; `skip` leaves it ok and hands the ranks to every op (op_finished::first_dims).
std::vector<int64_t> check_nonfinite(self_ptr self, const bucket_job& job, status& st) {
  if (!st.ok() || !job.nonfinite || !job.nonfinite->any()) return {};
  auto ranks = job.nonfinite->ranks();
  if (job.members)  // the rings of a process set count its members: name job ranks
    for (auto& r : ranks)
      if (r >= 0 && static_cast<std::size_t>(r) < job.members->size()) r = (*job.members)[static_cast<std::size_t>(r)];
  std::string names, list;
  std::vector<std::string> tensors;
  for (const auto& op : job.ops) {
    if (is_join_filler(op)) continue;
    names += (names.empty() ? "'" : ", '") + op.spec.name + "'";
    tensors.push_back(op.spec.name);
  }
  for (int r : ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
  const auto mode = job.ops.front().spec.check;
  ++self->state.nonfinite_found;
  observer_of(self->state.wired.observer).on_nonfinite(tensors, ranks, name_of(mode), std::chrono::steady_clock::now());
  if (mode == nan_check::error) {
    st = status{errc::invalid_argument, "NaN or Inf in the input of rank(s) " + list + " (tensors " + names +
                                            "); CHORUS_NAN_CHECK=error ends the operation on every rank"};
    return {};
  }
  CHORUS_LOG(debug, "completion", "nan_check=skip ranks=" << list << " tensors=" << names);
  return std::vector<int64_t>(ranks.begin(), ranks.end());
}

/// This rank among the ranks `job` ran on (its process set's members, or the job's).
int group_rank(self_ptr self, const bucket_job& job) { return job.members ? job.group_rank : self->state.cfg.rank; }
int group_size(self_ptr self, const bucket_job& job) { return job.members ? job.group_size : self->state.cfg.size; }

void finish_bucket(self_ptr self, completion_state::entry& e) {
  auto& job = *e.job;
  status st = e.error.ok() ? job.local_error : e.error;
  const std::vector<int64_t> skipped = check_nonfinite(self, job, st);
  if (!st.ok()) observer_of(self->state.wired.observer).on_error(to_string(st.code()), st, std::chrono::steady_clock::now());
  ops_finished ended;
  if (job.bystander) {
    for (const auto& op : job.ops) end_op(self, ended, op, st);  // stand-ins end silently
  } else if (st.ok() && job.plan.kind == fusable_kind::allgather) {
    end_op(self, ended, job.ops.front(), st, std::move(job.gathered), job.first_dims);
  } else if (st.ok() && job.plan.kind == fusable_kind::alltoall) {
    end_op(self, ended, job.ops.front(), st, std::move(job.gathered),
           received_splits(job, group_rank(self, job), group_size(self, job)));
  } else if (st.ok() && job.plan.kind == fusable_kind::reducescatter) {
    const auto& op = job.ops.front();
    auto slice = split_rows(static_cast<std::size_t>(op.spec.shape[0]), job.row_bytes,
                            group_size(self, job))[static_cast<std::size_t>(group_rank(self, job))];
    if (slice.length) std::memcpy(op.output, job.data + slice.offset, slice.length);
    end_op(self, ended, op, st, {}, skipped);
  } else {
    for (const auto& op : job.ops) end_op(self, ended, op, st, {}, skipped);
  }
  if (!ended.ops.empty()) self->send(self->state.wired.producer, std::move(ended));
  ++self->state.buckets_done;
  if (self->state.wired.autotuner) {
    std::vector<uint64_t> tensors;
    tensors.reserve(job.ops.size());
    for (const auto& op : job.ops) tensors.push_back(tuning::tensor_id(op.spec.name));
    self->send(self->state.wired.autotuner,
               bucket_finished{job.cycle, job.plan.bytes, std::chrono::steady_clock::now(), std::move(tensors)});
  }
}

void report_end(self_ptr self, uint64_t sequence) {
  self->send(self->state.wired.fusion, chunk_ended{sequence});
}

}  // namespace

caf::behavior completion_actor(self_ptr self, completion_config cfg) {
  self->state.cfg = cfg;
  return {
      [=](const completion_wiring& w) { self->state.wired = w; },
      [=](const bucket_planned& p) {
        auto& s = self->state;
        const auto& job = p.job;
        s.buckets[job->id] = completion_state::entry{job, job->chunks, {}};
        for (uint32_t i = 0; i < job->chunks; ++i) s.unfinished.insert(job->first_sequence + i);
      },
      [=](const chunk_done& d) {
        auto& s = self->state;
        if (s.unfinished.erase(d.sequence) == 0) {
          CHORUS_LOG(error, "completion", "sequence=" << d.sequence << " ended twice or was never planned");
          return;
        }
        auto it = s.buckets.find(d.bucket);
        if (it == s.buckets.end()) {
          CHORUS_LOG(error, "completion", "sequence=" << d.sequence << " of unknown bucket=" << d.bucket);
          report_end(self, d.sequence);
          return;
        }
        auto& e = it->second;
        if (!d.result.ok() && e.error.ok()) {
          e.error = d.result;
          // An allgather's row chunk reads the counts: tell it they are not there (the
          // chunk_ended below orders this write before that chunk starts).
          auto kind = e.job->plan.kind;
          if (kind == fusable_kind::allgather || kind == fusable_kind::alltoall) e.job->local_error = d.result;
        }
        if (d.result.ok() && e.error.ok() && e.job->fused() && !e.job->scattered && !e.job->bystander)
          unpack_chunk(e, d.sequence);
        if (--e.left == 0) {
          finish_bucket(self, e);
          s.buckets.erase(it);
        }
        report_end(self, d.sequence);
      },
  };
}

}  // namespace chorus
