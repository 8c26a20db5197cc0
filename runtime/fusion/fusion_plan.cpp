// Bucket and chunk planning (see fusion_plan.hpp for the contracts).
#include "runtime/fusion/fusion_plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <tuple>

#include "runtime/core/log.hpp"

namespace chorus {
namespace {

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Fusable tensors share a bucket only when one collective can reduce them together.
using fusion_key = std::tuple<dtype, reduce_op, int, int, int64_t>;

fusion_key key_of(const fusion_item& it) { return {it.type, it.op, it.device, it.process_set, it.wire_mode}; }

bucket bucket_of(const fusion_item& it) {
  bucket b;
  b.kind = it.kind;
  b.type = it.type;
  b.op = it.op;
  b.root = it.root;
  b.device = it.device;
  b.process_set = it.process_set;
  b.wire_mode = it.wire_mode;
  b.members.push_back({it.id, 0, it.bytes});
  b.bytes = it.bytes;
  return b;
}

// Sizes come from agreed shapes times the element size, so a partial element is a broken
// invariant upstream; a plan built on it would cut elements in half.
void check_whole_elements(std::size_t bytes, dtype type, const char* what, std::size_t index, uint32_t id) {
  if (bytes % size_of(type) == 0) return;
  CHORUS_LOG(error, "fusion", "size is not a whole number of elements " << what << "=" << index << " id=" << id
                                  << " bytes=" << bytes << " dtype=" << name_of(type)
                                  << " element_bytes=" << size_of(type));
  std::abort();
}

}  // namespace

const char* to_string(fusable_kind kind) {
  switch (kind) {
    case fusable_kind::allreduce: return "allreduce";
    case fusable_kind::broadcast: return "broadcast";
    case fusable_kind::allgather: return "allgather";
    case fusable_kind::reducescatter: return "reducescatter";
    case fusable_kind::alltoall: return "alltoall";
  }
  return "unknown";
}

std::vector<bucket> plan_buckets(const std::vector<fusion_item>& batch, std::size_t fusion_threshold) {
  std::vector<bucket> buckets;
  buckets.reserve(batch.size());
  // Open bucket per key, as an index into `buckets`. A batch holds few distinct keys, so a
  // linear scan beats a map. Buckets are appended when their first member is seen, which
  // makes their order the batch order of first members without a sort.
  std::vector<std::pair<fusion_key, std::size_t>> open;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const fusion_item& it = batch[i];
    check_whole_elements(it.bytes, it.type, "batch_position", i, it.id);
    const bool fusable = it.kind == fusable_kind::allreduce && fusion_threshold > 0 &&
                         it.bytes <= fusion_threshold;
    if (!fusable) {
      buckets.push_back(bucket_of(it));
      continue;
    }
    const fusion_key key = key_of(it);
    auto slot = std::find_if(open.begin(), open.end(), [&](const auto& o) { return o.first == key; });
    if (slot != open.end()) {
      bucket& b = buckets[slot->second];
      const std::size_t offset = align_up(b.bytes, fusion_alignment);
      if (offset + it.bytes <= fusion_threshold) {
        b.members.push_back({it.id, offset, it.bytes});
        b.bytes = offset + it.bytes;
        continue;
      }
      slot->second = buckets.size();  // the old bucket is full: it stays closed
    } else {
      open.emplace_back(key, buckets.size());
    }
    buckets.push_back(bucket_of(it));
  }
  for (auto& b : buckets) b.in_place = b.members.size() == 1;
  return buckets;
}

std::vector<chunk> plan_chunks(const std::vector<bucket>& buckets, std::size_t chunk_bytes,
                               uint64_t first_sequence) {
  std::vector<chunk> chunks;
  uint64_t sequence = first_sequence;
  for (std::size_t bi = 0; bi < buckets.size(); ++bi) {
    const bucket& b = buckets[bi];
    const auto index = static_cast<uint32_t>(bi);
    const std::size_t element = size_of(b.type);
    check_whole_elements(b.bytes, b.type, "bucket", bi, b.members.empty() ? 0 : b.members.front().id);
    const bool uncut = b.kind == fusable_kind::allgather || b.kind == fusable_kind::alltoall ||
                       b.kind == fusable_kind::reducescatter;
    for (const auto& r : cut_chunks(b.bytes, uncut ? 0 : chunk_bytes, element))
      chunks.push_back({sequence++, index, r.offset, r.bytes});
  }
  return chunks;
}

std::vector<chunk_cut> cut_chunks(std::size_t total, std::size_t chunk_bytes, std::size_t element) {
  if (chunk_bytes == 0 || total == 0) return {{0, total}};
  const std::size_t cut = std::max(chunk_bytes / element * element, element);
  std::vector<chunk_cut> out;
  out.reserve((total + cut - 1) / cut);
  for (std::size_t off = 0; off < total; off += cut) out.push_back({off, std::min(cut, total - off)});
  return out;
}

}  // namespace chorus
