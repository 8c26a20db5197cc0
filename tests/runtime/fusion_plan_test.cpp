// Tests of the fusion plan (runtime/fusion/fusion_plan.hpp): properties checked on seeded
// random batches, fixed cases for the edges, and the ResNet-50 batch the benchmark uses.
// Randomised tests print their seed once per process; CHORUS_TEST_SEED=<n> re-runs with it.
#include "runtime/fusion/fusion_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "runtime/fusion/resnet50_sizes.hpp"

namespace chorus {
namespace {

uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("CHORUS_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 0) : 20240612;
    std::printf("fusion_plan_test seed=%llu (set CHORUS_TEST_SEED to repeat)\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

fusion_item allreduce(uint32_t id, std::size_t bytes, dtype t = dtype::f32) {
  fusion_item it;
  it.id = id;
  it.type = t;
  it.bytes = bytes;
  return it;
}

// A batch mixing kinds, dtypes, ops, devices and process sets, with sizes from zero to a few
// times the threshold (so some tensors are exactly at it, some above).
bool uncut_kind(fusable_kind k) {
  return k == fusable_kind::allgather || k == fusable_kind::alltoall || k == fusable_kind::reducescatter;
}

std::vector<fusion_item> random_batch(std::mt19937_64& rng, std::size_t threshold) {
  std::uniform_int_distribution<int> count(0, 60), pick(0, 99), small(0, 3);
  std::vector<fusion_item> batch;
  const int n = count(rng);
  for (int i = 0; i < n; ++i) {
    fusion_item it;
    it.id = static_cast<uint32_t>(1000 + 7 * i);  // unique, not equal to the position
    const int k = pick(rng);
    it.kind = k < 80   ? fusable_kind::allreduce
              : k < 88 ? fusable_kind::broadcast
              : k < 92 ? fusable_kind::allgather
              : k < 96 ? fusable_kind::reducescatter
                       : fusable_kind::alltoall;
    it.type = static_cast<dtype>(small(rng) == 0 ? pick(rng) % dtype_count : 2);
    it.op = static_cast<reduce_op>(small(rng) == 0 ? pick(rng) % arithmetic_reduce_op_count : 0);
    it.root = small(rng);
    it.device = small(rng) == 0 ? 1 : -1;
    it.process_set = small(rng) == 0 ? 1 : 0;
    const std::size_t max_elems = threshold == 0 ? 4096 : 3 * threshold / size_of(it.type) + 1;
    std::size_t elems = std::uniform_int_distribution<std::size_t>(0, max_elems)(rng);
    if (pick(rng) < 70) elems /= 16;  // mostly small tensors, as in real models
    if (pick(rng) < 5 && threshold > 0) elems = threshold / size_of(it.type);  // exactly at it
    it.bytes = elems * size_of(it.type);
    batch.push_back(it);
  }
  return batch;
}

// Every property plan_buckets() promises, checked on one batch.
void check_buckets(const std::vector<fusion_item>& batch, std::size_t threshold, const std::vector<bucket>& buckets) {
  std::map<uint32_t, std::size_t> position;
  for (std::size_t i = 0; i < batch.size(); ++i) position[batch[i].id] = i;
  std::map<uint32_t, int> seen;
  std::size_t previous_first = 0;
  for (std::size_t bi = 0; bi < buckets.size(); ++bi) {
    const bucket& b = buckets[bi];
    SCOPED_TRACE("bucket " + std::to_string(bi));
    ASSERT_FALSE(b.members.empty());
    // Order: buckets by first member, members by batch position.
    const std::size_t first = position.at(b.members.front().id);
    if (bi > 0) EXPECT_LT(previous_first, first);
    previous_first = first;
    EXPECT_EQ(b.in_place, b.members.size() == 1);
    EXPECT_TRUE((threshold > 0 && b.bytes <= threshold) || b.in_place) << "bytes=" << b.bytes;
    if (threshold == 0) EXPECT_TRUE(b.in_place);
    std::size_t end = 0;
    for (std::size_t mi = 0; mi < b.members.size(); ++mi) {
      const auto& m = b.members[mi];
      const fusion_item& it = batch[position.at(m.id)];
      ++seen[m.id];
      EXPECT_EQ(m.bytes, it.bytes);
      EXPECT_EQ(it.kind, b.kind);
      EXPECT_EQ(it.type, b.type);
      EXPECT_EQ(it.device, b.device);
      EXPECT_EQ(it.process_set, b.process_set);
      if (b.kind == fusable_kind::allreduce) EXPECT_EQ(it.op, b.op);
      if (b.kind == fusable_kind::broadcast) EXPECT_EQ(it.root, b.root);
      if (b.kind != fusable_kind::allreduce) EXPECT_TRUE(b.in_place);
      if (mi > 0) EXPECT_LT(position.at(b.members[mi - 1].id), position.at(m.id));
      EXPECT_EQ(m.offset % fusion_alignment, 0u);
      EXPECT_GE(m.offset, end);                           // no overlap
      EXPECT_LT(m.offset, end + fusion_alignment);        // padding below one alignment
      end = m.offset + m.bytes;
    }
    EXPECT_EQ(b.bytes, end);
    if (b.in_place) EXPECT_EQ(b.members.front().offset, 0u);
  }
  EXPECT_EQ(seen.size(), batch.size());
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "id " << id;
}

void check_chunks(const std::vector<bucket>& buckets, std::size_t chunk_bytes, uint64_t first,
                  const std::vector<chunk>& chunks) {
  std::vector<std::size_t> covered(buckets.size(), 0);
  std::vector<int> pieces(buckets.size(), 0);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const chunk& c = chunks[i];
    SCOPED_TRACE("chunk " + std::to_string(i));
    EXPECT_EQ(c.sequence, first + i);
    ASSERT_LT(c.bucket, buckets.size());
    if (i > 0) EXPECT_GE(c.bucket, chunks[i - 1].bucket);  // bucket order
    const bucket& b = buckets[c.bucket];
    const std::size_t element = size_of(b.type);
    EXPECT_EQ(c.offset, covered[c.bucket]);  // contiguous, ascending, no gap or overlap
    EXPECT_EQ(c.offset % element, 0u);
    EXPECT_EQ(c.bytes % element, 0u);
    if (b.kind != fusable_kind::allgather && !uncut_kind(b.kind) && chunk_bytes > 0)
      EXPECT_LE(c.bytes, std::max(chunk_bytes, element));
    if (b.bytes > 0) EXPECT_GT(c.bytes, 0u);
    covered[c.bucket] += c.bytes;
    ++pieces[c.bucket];
  }
  for (std::size_t bi = 0; bi < buckets.size(); ++bi) {
    EXPECT_EQ(covered[bi], buckets[bi].bytes) << "bucket " << bi;
    EXPECT_GE(pieces[bi], 1) << "bucket " << bi << " has no chunk";
    if (uncut_kind(buckets[bi].kind) || chunk_bytes == 0) EXPECT_EQ(pieces[bi], 1);
  }
}

TEST(fusion_plan, random_batches_keep_every_promise) {
  std::mt19937_64 rng{test_seed()};
  const std::size_t thresholds[] = {0, 64, 1000, 4096, 1 << 20};
  const std::size_t chunk_sizes[] = {0, 1, 3, 64, 1000, 1 << 16};
  for (int round = 0; round < 400; ++round) {
    const std::size_t threshold = thresholds[round % 5];
    const auto batch = random_batch(rng, threshold);
    std::size_t total = 0;
    for (const auto& it : batch) total += it.bytes;
    std::size_t chunk_bytes = chunk_sizes[(round / 5) % 6];
    if (chunk_bytes > 0) chunk_bytes = std::max(chunk_bytes, total / 20000);  // bound the chunk count
    SCOPED_TRACE("round " + std::to_string(round) + " threshold " + std::to_string(threshold) + " chunk " +
                 std::to_string(chunk_bytes));
    const auto buckets = plan_buckets(batch, threshold);
    check_buckets(batch, threshold, buckets);
    const uint64_t first = rng() >> 8;
    const auto chunks = plan_chunks(buckets, chunk_bytes, first);
    check_chunks(buckets, chunk_bytes, first, chunks);
    // Deterministic: every rank computing the plan again gets the same answer.
    EXPECT_EQ(plan_buckets(batch, threshold), buckets);
    EXPECT_EQ(plan_chunks(buckets, chunk_bytes, first), chunks);
    if (HasFailure()) return;
  }
}

TEST(fusion_plan, threshold_zero_gives_one_in_place_bucket_per_tensor) {
  std::vector<fusion_item> batch = {allreduce(1, 40), allreduce(2, 8), allreduce(3, 0), allreduce(4, 1 << 20)};
  const auto buckets = plan_buckets(batch, 0);
  ASSERT_EQ(buckets.size(), batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    EXPECT_TRUE(buckets[i].in_place);
    EXPECT_EQ(buckets[i].members, (std::vector<bucket_member>{{batch[i].id, 0, batch[i].bytes}}));
  }
}

TEST(fusion_plan, packs_with_aligned_offsets_and_closes_full_buckets) {
  // 100 + pad 28 + 100 = 228 <= 256; the third would end at 356 > 256: a new bucket.
  const auto buckets = plan_buckets({allreduce(1, 100), allreduce(2, 100), allreduce(3, 100)}, 256);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].members, (std::vector<bucket_member>{{1, 0, 100}, {2, 128, 100}}));
  EXPECT_EQ(buckets[0].bytes, 228u);
  EXPECT_FALSE(buckets[0].in_place);
  EXPECT_EQ(buckets[1].members, (std::vector<bucket_member>{{3, 0, 100}}));
  EXPECT_TRUE(buckets[1].in_place);
}

TEST(fusion_plan, large_tensor_is_its_own_in_place_bucket_and_keeps_the_open_one) {
  const auto buckets = plan_buckets({allreduce(1, 8), allreduce(2, 4096), allreduce(3, 8)}, 1024);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].members, (std::vector<bucket_member>{{1, 0, 8}, {3, 64, 8}}));
  EXPECT_TRUE(buckets[1].in_place);
  EXPECT_EQ(buckets[1].members.front().id, 2u);
}

TEST(fusion_plan, interleaved_keys_fuse_per_key_and_other_kinds_stand_alone) {
  fusion_item half = allreduce(2, 16, dtype::f16);
  fusion_item other_device = allreduce(4, 16);
  other_device.device = 0;
  fusion_item bcast = allreduce(5, 16);
  bcast.kind = fusable_kind::broadcast;
  fusion_item maxed = allreduce(6, 16);
  maxed.op = reduce_op::max;
  fusion_item other_set = allreduce(8, 16);
  other_set.process_set = 3;
  const auto buckets = plan_buckets(
      {allreduce(1, 16), half, allreduce(3, 16), other_device, bcast, maxed, allreduce(7, 16, dtype::f16), other_set},
      1 << 20);
  std::vector<std::vector<uint32_t>> ids;
  for (const auto& b : buckets) {
    ids.emplace_back();
    for (const auto& m : b.members) ids.back().push_back(m.id);
  }
  EXPECT_EQ(ids, (std::vector<std::vector<uint32_t>>{{1, 3}, {2, 7}, {4}, {5}, {6}, {8}}));
  EXPECT_EQ(buckets[3].kind, fusable_kind::broadcast);
}

TEST(fusion_plan, zero_byte_buckets_get_one_empty_chunk) {
  const auto buckets = plan_buckets({allreduce(1, 0), allreduce(2, 400)}, 0);
  const auto chunks = plan_chunks(buckets, 256, 41);
  EXPECT_EQ(chunks, (std::vector<chunk>{{41, 0, 0, 0}, {42, 1, 0, 256}, {43, 1, 256, 144}}));
}

TEST(fusion_plan, chunks_are_element_aligned) {
  // f64 elements: 100 bytes round down to 96; 5 bytes round up to one element.
  const auto buckets = plan_buckets({allreduce(1, 8 * 25, dtype::f64)}, 0);
  EXPECT_EQ(plan_chunks(buckets, 100, 0), (std::vector<chunk>{{0, 0, 0, 96}, {1, 0, 96, 96}, {2, 0, 192, 8}}));
  EXPECT_EQ(plan_chunks(buckets, 5, 0).size(), 25u);
}

TEST(fusion_plan, the_one_cut_covers_the_buffer_in_whole_elements) {
  using v = std::vector<std::pair<std::size_t, std::size_t>>;
  auto cut = [](std::size_t total, std::size_t chunk, std::size_t element) {
    v out;
    for (const auto& r : cut_chunks(total, chunk, element)) out.emplace_back(r.offset, r.bytes);
    return out;
  };
  EXPECT_EQ(cut(10, 4, 1), (v{{0, 4}, {4, 4}, {8, 2}}));
  EXPECT_EQ(cut(24, 10, 4), (v{{0, 8}, {8, 8}, {16, 8}}));  // 10 rounds down to 8: whole floats
  EXPECT_EQ(cut(16, 3, 8), (v{{0, 8}, {8, 8}}));            // below one element: one element each
  EXPECT_EQ(cut(16, 0, 4), (v{{0, 16}}));                   // 0: no cut
  EXPECT_EQ(cut(0, 4, 4), (v{{0, 0}}));                     // empty: one empty piece
  EXPECT_EQ(cut(12, 12, 4), (v{{0, 12}}));
}

TEST(fusion_plan, allgather_alltoall_and_reducescatter_are_never_cut_or_fused) {
  for (auto kind : {fusable_kind::allgather, fusable_kind::alltoall, fusable_kind::reducescatter}) {
    SCOPED_TRACE(to_string(kind));
    fusion_item a = allreduce(1, 4096), b = allreduce(2, 64);
    a.kind = b.kind = kind;
    const auto buckets = plan_buckets({a, b}, 1 << 20);
    ASSERT_EQ(buckets.size(), 2u);
    const auto chunks = plan_chunks(buckets, 1024, 7);
    EXPECT_EQ(chunks, (std::vector<chunk>{{7, 0, 0, 4096}, {8, 1, 0, 64}}));
  }
}

TEST(fusion_plan, resnet50_sizes_are_torchvision_resnet50) {
  ASSERT_EQ(resnet50_sizes.size(), 161u);
  uint64_t total = 0;
  for (uint64_t v : resnet50_sizes) total += v;
  EXPECT_EQ(total, 25'557'032u);
  EXPECT_EQ(resnet50_sizes.front(), 64u * 3 * 7 * 7);   // conv1.weight
  EXPECT_EQ(resnet50_sizes[160], 1000u);                // fc.bias
  EXPECT_EQ(resnet50_sizes[159], 2048u * 1000);         // fc.weight
}

TEST(fusion_plan, resnet50_batch_fuses_into_few_buckets) {
  // Gradients in backward order (fc first), f32, as the pipeline benchmark enqueues them.
  std::vector<fusion_item> batch;
  for (std::size_t i = 0; i < resnet50_sizes.size(); ++i) {
    const std::size_t layer = resnet50_sizes.size() - 1 - i;
    batch.push_back(allreduce(static_cast<uint32_t>(layer), resnet50_sizes[layer] * 4));
  }
  std::size_t over_mib = 0;
  for (const auto& it : batch) over_mib += it.bytes > (1u << 20);
  EXPECT_GT(over_mib, 10u);

  const std::size_t threshold = std::size_t{64} << 20;
  const auto buckets = plan_buckets(batch, threshold);
  check_buckets(batch, threshold, buckets);
  EXPECT_EQ(buckets.size(), 2u);  // 102 MB of gradients into 64 MiB buckets
  const auto chunks = plan_chunks(buckets, std::size_t{1} << 20, 0);
  check_chunks(buckets, std::size_t{1} << 20, 0, chunks);

  // A small threshold still keeps every tensor exactly once and puts big ones in place.
  const auto small = plan_buckets(batch, 1 << 20);
  check_buckets(batch, 1 << 20, small);
  for (const auto& b : small)
    if (b.bytes > (1u << 20)) EXPECT_TRUE(b.in_place);
}

}  // namespace
}  // namespace chorus
