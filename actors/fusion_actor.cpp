// The fusion actor: agreed batch → buckets → chunks, packed and handed to the senders within
// the start window.
#include "actors/fusion_actor.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <iterator>

#include "actors/bucket_ranges.hpp"
#include "runtime/collectives/hier_allgather.hpp"
#include "runtime/collectives/stream_board.hpp"
#include "runtime/collectives/wire_ring_op.hpp"
#include "runtime/collectives/scatter_plan.hpp"
#include "runtime/core/log.hpp"
#include "runtime/fusion/fusion_plan.hpp"

namespace chorus {

namespace {

using self_ptr = caf::stateful_actor<fusion_state>*;

fusable_kind fusable_of(collective_kind k) {
  switch (k) {
    case collective_kind::broadcast: return fusable_kind::broadcast;
    case collective_kind::allgather: return fusable_kind::allgather;
    case collective_kind::reducescatter: return fusable_kind::reducescatter;
    case collective_kind::alltoall: return fusable_kind::alltoall;
    default: return fusable_kind::allreduce;
  }
}

std::size_t row_bytes_of(const tensor_spec& s) {
  std::size_t n = size_of(s.type);
  for (std::size_t i = 1; i < s.shape.size(); ++i) n *= static_cast<std::size_t>(s.shape[i]);
  return n;
}

/// The allreduce algorithm of a host chunk of `bytes` (identical on every rank).
chunk_algo allreduce_algo(const fusion_config& c, std::size_t bytes) {
  static const host_groups flat;
  switch (choose_allreduce(c.hierarchical, c.hosts ? *c.hosts : flat, bytes, c.small_bytes)) {
    case allreduce_choice::recursive_doubling: return chunk_algo::exchange_allreduce;
    case allreduce_choice::hier_sharded: return chunk_algo::hier_sharded;
    case allreduce_choice::hier_leader: return chunk_algo::hier_leader;
    case allreduce_choice::ring: break;
  }
  return chunk_algo::ring_allreduce;
}

/// Points job->data at the buffer the collective runs on.
void prepare_buffer(fusion_state& s, bucket_job& job) {
  const auto& b = job.plan;
  if (b.in_place && b.kind != fusable_kind::reducescatter) {
    auto& op = job.ops.front();
    job.data = static_cast<std::byte*>(op.output);
    if (op.input && op.input != op.output && b.bytes) std::memcpy(op.output, op.input, b.bytes);
    return;
  }
  auto lease = s.pool->acquire(b.bytes);
  if (lease) {
    job.lease = std::move(*lease);
    job.data = job.lease.data();
  } else {
    ++s.heap_fallbacks;
    CHORUS_LOG(debug, "fusion", "pool full, heap buffer for bucket=" << job.id << " bytes=" << b.bytes << ": "
                                                                     << lease.error().message());
    job.heap.assign(b.bytes, std::byte{0});
    job.data = job.heap.data();
  }
  s.fused_bytes += b.bytes;
  // A reduce-scatter uses every slice as scratch: it runs on a copy, the input stays intact.
  const auto& op = job.ops.front();
  if (b.kind == fusable_kind::reducescatter && b.bytes) std::memcpy(job.data, op.input, b.bytes);
}

/// The compression `spec`'s bucket runs with: the compression policy (CHORUS_COMPRESSION_SHM) judges the links
/// among the ranks it runs on, its process set's members, else all ranks. Only the chunks'
/// execution follows it, never the plan, so a rank that judges differently (a set unknown
/// here: its ops end with an error anyway) still numbers its chunks as the others do.
compression effective_wire(const fusion_state& s, const tensor_spec& spec) {
  if (spec.wire == compression::none || !s.cfg.wire_compression) return spec.wire;
  auto set = spec.process_set != 0 && s.cfg.process_sets ? s.cfg.process_sets->find(spec.process_set) : nullptr;
  return set ? s.cfg.wire_compression->effective(spec.wire, set->ranks) : s.cfg.wire_compression->effective(spec.wire);
}

/// Readies an allreduce or broadcast chunk just before it is handed out: the bucket's buffer
/// is taken when its first chunk goes (so pooled memory follows the start window, not the
/// batch), and a fused chunk is packed. A pack failure still hands the chunk out (every
/// rank must start every sequence); completion reports the error.
void ready_chunk(fusion_state& s, chunk_work& w) {
  auto& job = *w.job;
  auto index = w.sequence - job.first_sequence;
  if (job.scattered) {  // runs on the members' outputs (chunk_runner): out-of-place inputs go there
    auto [offset, bytes] = job.chunk_ranges[index];
    copy_inputs(job, offset, offset + bytes);
    return;
  }
  if (index == 0) prepare_buffer(s, job);
  auto [offset, bytes] = job.chunk_ranges[index];
  w.data = job.data ? job.data + offset : nullptr;
  if (job.plan.kind == fusable_kind::reducescatter) w.data = job.data;  // offsets are inside every slice
  if (!job.fused()) return;
  auto st = pack_range(job, offset, offset + bytes);
  if (!st.ok() && job.local_error.ok()) {
    CHORUS_LOG(error, "fusion", "bucket=" << job.id << " pack failed: " << st.message());
    job.local_error = {errc::internal, "packing the fusion buffer failed: " + st.message()};
  }
}

/// plan_buckets, except that allreduce tensors of at least `in_place_bytes` (0: none) become
/// in-place buckets of their own: a copy in and out costs more than fusion saves for them.
/// Not those `direct_whole` says the direct path runs in any bucket: fusing them copies
/// nothing (bucket_job::scattered), and fewer buckets cost fewer completions.
/// Buckets keep the order of their first member in the batch, on every rank alike.
/// CUDA tensors (device >= 0) always get an in-place bucket of their own: their bytes are
/// device memory, never packed by the host.
std::vector<bucket> plan_with_in_place(const std::vector<fusion_item>& items, std::size_t threshold,
                                       std::size_t in_place_bytes,
                                       const std::function<bool(const fusion_item&)>& direct_whole) {
  const bool any_device = std::any_of(items.begin(), items.end(), [](const fusion_item& it) { return it.device >= 0; });
  if (in_place_bytes == 0 && !any_device) return plan_buckets(items, threshold);
  std::vector<fusion_item> small, large;
  for (const auto& it : items)
    (it.device >= 0 || (in_place_bytes && it.kind == fusable_kind::allreduce && it.bytes >= in_place_bytes &&
                        !direct_whole(it))
         ? large
         : small)
        .push_back(it);
  auto a = plan_buckets(small, threshold), b = plan_buckets(large, 0);
  std::vector<bucket> out;
  out.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out),
             [](const bucket& x, const bucket& y) { return x.members.front().id < y.members.front().id; });
  return out;
}

/// A fusion item's wire mode: 0 for a plain tensor (no compression, no check, prescale 1), as
/// chunk_runner's wire_of(); only those may take the hierarchical allreduce. Otherwise every
/// setting, so that tensors fuse only with their like.
int64_t wire_mode_of(const tensor_spec& spec) {
  const bool plain = spec.wire == compression::none && spec.check == nan_check::off && spec.prescale == 1.0f;
  return plain ? 0
               : static_cast<int64_t>(spec.wire) | static_cast<int64_t>(spec.check) << 4 |
                     static_cast<int64_t>(std::bit_cast<uint32_t>(spec.prescale)) << 8 | int64_t{1} << 40;
}

/// Whether the mailboxes can run a bucket of this wire mode: plain, or asking for the NaN/Inf
/// check alone (which they do inside their fold: mailbox_allreduce::run).
bool mailbox_mode(int64_t wire_mode) {
  return wire_mode == 0 ||
         ((wire_mode & 0xf) == 0 && (wire_mode >> 8 & 0xffffffff) == std::bit_cast<uint32_t>(1.0f));
}

/// Whether an allreduce of the job's own set on the host (`x`: a fusion item or a bucket) of
/// `bytes` goes to the direct path, as far as the plan can tell (the compression policy may
/// send more there as chunks run: plan_batch's `direct`). The same answer on every rank.
template <class T>
bool direct_as_planned(std::size_t lane, const T& x, std::size_t bytes) {
  return x.kind == fusable_kind::allreduce && x.device < 0 && x.process_set == 0 && mailbox_mode(x.wire_mode) &&
         mailbox_allreduce::takes(lane, bytes, x.type, x.op);
}

/// The member-local rank of job rank `root` in `job`'s process set (-1: not a member).
int local_root(const bucket_job& job, int root) {
  const auto& m = *job.members;
  auto it = std::find(m.begin(), m.end(), root);
  return it == m.end() ? -1 : static_cast<int>(it - m.begin());
}

/// Where a bucket runs: its process set's members, this rank among them; a bystander when
/// the set leaves this rank out (or is unknown here: then an error for its ops).
void place_in_set(const fusion_state& s, bucket_job& job) {
  const auto& spec = job.ops.front().spec;
  job.group_rank = s.cfg.rank;
  job.group_size = s.cfg.size;
  if (spec.process_set == 0) return;
  auto set = s.cfg.process_sets ? s.cfg.process_sets->find(spec.process_set) : nullptr;
  if (!set) {
    job.bystander = true;
    job.local_error = {errc::invalid_argument, describe(spec) + ": process set " + std::to_string(spec.process_set) +
                                                   " is not registered on rank " + std::to_string(s.cfg.rank) +
                                                   " (removed while the operation was pending?)"};
    return;
  }
  job.group_size = set->size();
  job.group_rank = std::max(0, set->local_rank(s.cfg.rank));
  if (!set->includes(s.cfg.rank)) {
    job.bystander = true;
    return;
  }
  job.members = std::shared_ptr<const std::vector<int>>(set, &set->ranks);
}

/// Whether `w` runs before every chunk handed out here that has not ended.
bool before_every_handed(const fusion_state& s, const chunk_work& w) {
  for (const auto& [sequence, priority] : s.handed)
    if (!runs_before(w.priority, w.sequence, priority, sequence)) return false;
  return true;
}

void dispatch(self_ptr self) {
  auto& s = self->state;
  if (s.wired.senders.empty()) return;
  while (!s.waiting.empty()) {
    const auto& w = s.waiting.front();
    if (w.job && w.job->bystander) {
      // Not this rank's set: the chunk's sequence number is used up here, nothing runs.
      self->send(s.wired.completion, chunk_done{w.sequence, w.job->id, -1, {}});
      s.waiting.pop_front();
      continue;
    }
    const bool first = before_every_handed(s, w);
    if (s.handed.size() >= s.cfg.start_window && !first) break;
    const bool counted = w.algo == chunk_algo::allgather_data || w.algo == chunk_algo::hier_allgather ||
                         w.algo == chunk_algo::alltoall_data;
    if (counted && !first) break;
    if (!counted && w.algo != chunk_algo::allgather_counts && w.algo != chunk_algo::alltoall_counts)
      ready_chunk(s, s.waiting.front());
    const auto all = s.wired.senders.size();
    // The autotuner may use fewer streams than connections (the board then places among them).
    const auto n = s.active_streams > 0 ? std::min(all, static_cast<std::size_t>(s.active_streams)) : all;
    // Direct chunks all go to stream 0: they run one at a time off the streams (sender_actor.hpp).
    auto to = w.algo == chunk_algo::mailbox_allreduce ? std::size_t{0}
              : s.wired.board && s.wired.board->streams() == static_cast<int>(all)
                  ? static_cast<std::size_t>(s.wired.board->place(w.bytes))
                  : static_cast<std::size_t>((w.sequence - s.cfg.first_sequence) % n);
    if (w.algo == chunk_algo::mailbox_allreduce && s.cfg.direct)
      s.cfg.direct->expect(w.sequence);  // its turn, before any later chunk's
    s.handed.emplace(w.sequence, w.priority);
    self->send(s.wired.senders[to], std::move(s.waiting.front()));
    s.waiting.pop_front();
  }
}

}  // namespace

std::string algorithm_of(const std::vector<chunk_work>& works) {
  std::string out;
  std::vector<const char*> seen;
  for (const auto& w : works) {
    if (w.algo == chunk_algo::allgather_counts) continue;
    const char* name = w.algo == chunk_algo::ring_allreduce       ? "ring"
                       : w.algo == chunk_algo::mailbox_allreduce   ? "direct"
                       : w.algo == chunk_algo::exchange_allreduce ? "recursive_doubling"
                       : w.algo == chunk_algo::hier_sharded       ? "hier_sharded"
                       : w.algo == chunk_algo::hier_leader        ? "hier_leader"
                       : w.algo == chunk_algo::allgather_data     ? name_of(allgather_choice::ring)
                       : w.algo == chunk_algo::hier_allgather     ? name_of(allgather_choice::hier)
                                                                  : nullptr;
    if (!name) return {};
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);
    out += (out.empty() ? "" : "+") + std::string(name);
  }
  return out;
}

std::vector<std::pair<std::shared_ptr<bucket_job>, std::vector<chunk_work>>> plan_batch(fusion_state& s,
                                                                                         const batch_agreed& agreed) {
  // Priority on: the batch in priority order (stable: ties keep the agreed order), the same
  // on every rank, so buckets fuse neighbours in that order.
  std::optional<batch_agreed> sorted;
  if (s.cfg.priority && std::adjacent_find(agreed.ops.begin(), agreed.ops.end(), [](const op_ref& a, const op_ref& c) {
                          return a.spec.priority != c.spec.priority;
                        }) != agreed.ops.end()) {
    sorted = agreed;
    std::stable_sort(sorted->ops.begin(), sorted->ops.end(),
                     [](const op_ref& a, const op_ref& c) { return a.spec.priority > c.spec.priority; });
  }
  const batch_agreed& b = sorted ? *sorted : agreed;
  std::vector<fusion_item> items;
  items.reserve(b.ops.size());
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    const auto& spec = b.ops[i].spec;
    fusion_item it;
    it.id = static_cast<uint32_t>(i);
    it.kind = fusable_of(spec.kind);
    it.type = spec.type;
    it.op = spec.op;
    it.root = spec.root;
    it.device = spec.device == device_kind::cuda ? b.ops[i].device_index : -1;
    it.process_set = spec.process_set;
    it.wire_mode = wire_mode_of(spec);
    it.bytes = spec.kind == collective_kind::allgather || spec.kind == collective_kind::alltoall
                   ? static_cast<std::size_t>(b.ops[i].first_dim) * row_bytes_of(spec)
                   : static_cast<std::size_t>(spec.byte_size());
    items.push_back(it);
  }
  std::vector<std::pair<std::shared_ptr<bucket_job>, std::vector<chunk_work>>> out;
  // The direct path takes buckets of every size (two ranks on one host): plain allreduces of
  // the job's own set run there whatever they are fused with (as plan_batch's `direct` below).
  const std::size_t lane = s.cfg.direct_max_bytes;
  auto direct_whole = [&](const fusion_item& it) {
    return lane == SIZE_MAX && direct_as_planned(lane, it, it.bytes);
  };
  for (auto& bk : plan_with_in_place(items, s.cfg.fusion_threshold, s.cfg.in_place_bytes, direct_whole)) {
    auto job = std::make_shared<bucket_job>();
    job->id = s.next_bucket++;
    job->cycle = b.cycle;
    job->plan = bk;
    for (uint32_t m = 0; m < job->plan.members.size(); ++m) {
      job->ops.push_back(b.ops[job->plan.members[m].id]);
      job->plan.members[m].id = m;  // from here on, ids index job->ops
    }
    const auto& spec = job->ops.front().spec;
    place_in_set(s, *job);
    const int grank = job->group_rank, gsize = job->group_size;
    if (spec.check != nan_check::off) job->nonfinite = std::make_shared<nonfinite_report>();
    job->wire = effective_wire(s, spec);  // the chunks run it (chunk_runner); the plan follows spec.wire
    std::vector<chunk_work> works;
    job->first_sequence = s.next_sequence;
    if (bk.kind == fusable_kind::allgather) {
      job->row_bytes = row_bytes_of(spec);
      job->first_dims.assign(static_cast<std::size_t>(gsize), 0);
      job->first_dims[static_cast<std::size_t>(grank)] = job->ops.front().first_dim;
      chunk_work counts{s.next_sequence++, chunk_algo::allgather_counts, nullptr,
                        static_cast<std::size_t>(gsize) * sizeof(int64_t), dtype::i64, reduce_op::sum, 0, job};
      // The rows by the hierarchy where it pays (hier_allgather.hpp); process sets, CUDA tensors,
      // compression and the NaN/Inf check keep the flat ring (wire_ring_op.hpp).
      static const host_groups no_hosts;
      const bool flat = spec.process_set != 0 || job->on_device() || bk.wire_mode != 0;
      const bool hier = !flat && choose_allgather(s.cfg.hierarchical, s.cfg.hosts ? *s.cfg.hosts : no_hosts) ==
                                     allgather_choice::hier;
      chunk_work rows{s.next_sequence++, hier ? chunk_algo::hier_allgather : chunk_algo::allgather_data, nullptr, 0,
                      spec.type, reduce_op::sum, 0, job};
      works.push_back(std::move(counts));
      works.push_back(std::move(rows));
    } else if (bk.kind == fusable_kind::alltoall) {
      // Counts first: every rank's splits (size x size), then the rows, like allgather.
      const auto n = static_cast<std::size_t>(gsize);
      job->row_bytes = row_bytes_of(spec);
      job->first_dims.assign(n * n, 0);
      const auto& splits = job->ops.front().splits;
      std::copy(splits.begin(), splits.end(), job->first_dims.begin() + static_cast<std::ptrdiff_t>(n) * grank);
      works.push_back(chunk_work{s.next_sequence++, chunk_algo::alltoall_counts, nullptr, n * n * sizeof(int64_t),
                                 dtype::i64, reduce_op::sum, 0, job});
      works.push_back(chunk_work{s.next_sequence++, chunk_algo::alltoall_data, nullptr, 0, spec.type, reduce_op::sum,
                                 0, job});
    } else if (bk.kind == fusable_kind::reducescatter) {
      // One chunk per window of every rank's slice (identical on every rank: same shape).
      job->row_bytes = row_bytes_of(spec);
      auto slices = split_rows(static_cast<std::size_t>(spec.shape[0]), job->row_bytes, gsize);
      for (const auto& w : scatter_windows(slices, size_of(spec.type), s.cfg.chunk_bytes, gsize)) {
        works.push_back(chunk_work{s.next_sequence++, chunk_algo::reducescatter, nullptr, w.bytes, spec.type, spec.op,
                                   0, job});
        job->chunk_ranges.emplace_back(w.offset, w.bytes);
      }
    } else {
      const bool device = job->on_device();
      if (device) job->device_order = s.next_device_order++;
      // Compressed buckets are cut by the bytes they put on the wire (2 per element), so their
      // chunks carry as many wire bytes, in as many frames, as plain ones.
      const bool halved = (bk.wire_mode & 0xf) != 0 && (bk.type == dtype::f32 || bk.type == dtype::f64);
      const std::size_t chunk_bytes = device && s.cfg.device_whole ? std::max<std::size_t>(job->plan.bytes, 1)
                                      : halved ? std::max<std::size_t>(1, s.cfg.chunk_bytes / 2) * size_of(bk.type)
                                               : s.cfg.chunk_bytes;
      // The NaN/Inf check alone keeps the direct path: the mailboxes check inside their fold.
      const bool direct = lane > 0 && !device && spec.process_set == 0 && bk.kind == fusable_kind::allreduce &&
                          job->wire == compression::none && spec.prescale == 1.0f;
      // A bucket the direct path takes whole stays one chunk: that path runs its chunks one
      // after another anyway (in 64 KiB pieces), so cutting would only add completions. Only
      // a bucket asked for plain (or checked alone): the compression policy decides how chunks
      // run, never the plan.
      const bool whole = direct_as_planned(lane, bk, job->plan.bytes);
      for (const auto& c : plan_chunks({job->plan}, whole ? 0 : chunk_bytes, s.next_sequence)) {
        // CUDA buckets and process sets (their own rings) take the flat algorithms.
        const bool flat = device || spec.process_set != 0;
        chunk_algo algo = bk.kind == fusable_kind::broadcast ? chunk_algo::broadcast
                          : flat ? (c.bytes <= s.cfg.small_bytes ? chunk_algo::exchange_allreduce : chunk_algo::ring_allreduce)
                                 : allreduce_algo(s.cfg, c.bytes);
        // Compression and the NaN/Inf check live in the flat ring (wire_ring_op.hpp).
        if (bk.wire_mode != 0 && (algo == chunk_algo::hier_sharded || algo == chunk_algo::hier_leader))
          algo = chunk_algo::ring_allreduce;
        // Every rank on one host: a plain or checked chunk (as run, after the compression policy) of the
        // global set goes through the mailboxes when the lane takes its size (alike everywhere).
        if (direct && mailbox_allreduce::takes(lane, c.bytes, bk.type, bk.op)) algo = chunk_algo::mailbox_allreduce;
        // A broadcast root is a job rank; inside a process set the ring counts members.
        const int root = job->members ? std::max(0, local_root(*job, bk.root)) : bk.root;
        works.push_back(chunk_work{c.sequence, algo, nullptr, c.bytes, bk.type, bk.op, root, job});  // data: at dispatch
        job->chunk_ranges.emplace_back(c.offset, c.bytes);
      }
      // Fused and every chunk direct: the mailboxes gather from the members' outputs and fold
      // into them (an out-of-place op's input is copied to its output first), so no copy into
      // a fusion buffer and back. A rank whose op lacks a buffer packs instead (and fails
      // naming it); a direct chunk of a fused bucket posts the members' bytes either way.
      job->scattered = job->fused() && !works.empty() &&
                       std::all_of(works.begin(), works.end(),
                                   [](const chunk_work& w) { return w.algo == chunk_algo::mailbox_allreduce; }) &&
                       std::all_of(job->ops.begin(), job->ops.end(),
                                   [](const op_ref& op) { return op.output && op.input; });
      s.next_sequence += works.size();
    }
    job->chunks = static_cast<uint32_t>(works.size());
    // Across batches, chunks wait in priority order (not on the mailbox lane, not CUDA buckets:
    // fusion_actor.hpp).
    if (s.cfg.priority && lane == 0 && !job->on_device()) {
      int32_t priority = INT32_MIN;
      for (const auto& op : job->ops) priority = std::max(priority, op.spec.priority);
      for (auto& w : works) w.priority = priority;
    }
    ++s.buckets;
    out.emplace_back(std::move(job), std::move(works));
  }
  return out;
}

void apply_switch(fusion_state& s, const tunables_switch& sw) {
  s.cfg.chunk_bytes = static_cast<std::size_t>(sw.chunk_bytes);
  s.cfg.fusion_threshold = static_cast<std::size_t>(sw.fusion_threshold);
  s.cfg.in_place_bytes = static_cast<std::size_t>(sw.in_place_bytes);
  s.active_streams = sw.streams;
  if (s.wired.board) s.wired.board->set_active(sw.streams);
  ++s.switches;
}

namespace {

void plan_and_send(self_ptr self, const batch_agreed& b) {
  auto& st = self->state;
  auto& obs = observer_of(st.wired.observer);
  // Nobody to tell: no observer, or only the slot with nothing installed. A timeline
  // installed later sees the buckets of the batches after it (as the slot's own fast
  // path does for every event).
  const bool observed = st.wired.observer && !(st.slot && !st.slot->installed());
  for (auto& [job, works] : plan_batch(st, b)) {
    if (observed) {
      telemetry::bucket_event e{job->id, b.cycle, job->first_sequence, job->chunks, job->plan.bytes,
                                job->plan.in_place, to_string(job->plan.kind), {}, {}};
      for (const auto& op : job->ops) e.tensors.push_back(op.spec.name);
      e.algorithm = algorithm_of(works);
      obs.on_bucket(e, std::chrono::steady_clock::now());
    }
    // Completion learns the bucket before any of its chunks can end (mailbox order).
    self->send(st.wired.completion, bucket_planned{job});
    for (auto& w : works) {
      auto at = std::upper_bound(st.waiting.begin(), st.waiting.end(), w,
                                 [](const chunk_work& a, const chunk_work& b) { return runs_before(a, b); });
      st.waiting.insert(at, std::move(w));
    }
  }
}

}  // namespace

caf::behavior fusion_actor(self_ptr self, fusion_config cfg) {
  auto& s = self->state;
  s.cfg = cfg;
  buffer_pool_options po;
  po.max_bytes = cfg.pool_bytes;
  po.fusion_threshold = cfg.fusion_threshold;
  po.pre_touch = cfg.pre_touch;
  s.pool = std::make_unique<buffer_pool>(po);
  s.next_sequence = cfg.first_sequence;
  return {
      [=](const fusion_wiring& w) {
        self->state.wired = w;
        self->state.slot = dynamic_cast<const telemetry::observer_slot*>(w.observer.get());
        dispatch(self);
      },
      [=](batch_agreed& b) {
        auto& st = self->state;
        if (!st.holds.empty() && b.cycle >= st.holds.front()) {
          st.held.push_back(std::move(b));  // its tunables are not known yet
          return;
        }
        plan_and_send(self, b);
        dispatch(self);
      },
      [=](const tunables_pending& p) { self->state.holds.push_back(p.cycle); },
      [=](const tunables_switch& sw) {
        auto& st = self->state;
        if (st.holds.empty() || st.holds.front() != sw.cycle) {
          CHORUS_LOG(error, "fusion", "tunables for cycle " << sw.cycle << " but "
                                          << (st.holds.empty() ? std::string("none pending")
                                                               : "cycle " + std::to_string(st.holds.front()) + " pending"));
          return;
        }
        st.holds.pop_front();
        apply_switch(st, sw);
        while (!st.held.empty() && (st.holds.empty() || st.held.front().cycle < st.holds.front())) {
          plan_and_send(self, st.held.front());
          st.held.pop_front();
        }
        dispatch(self);
      },
      [=](const chunk_ended& e) {
        self->state.handed.erase(e.sequence);
        dispatch(self);
      },
  };
}

}  // namespace chorus
