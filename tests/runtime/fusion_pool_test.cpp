// Tests of the fusion buffer pool (runtime/fusion/buffer_pool.hpp) and of pack/unpack
// (runtime/fusion/pack.hpp): reuse, pre-touch (checked with mincore), the cap, two threads
// sharing a pool, and a pack/unpack round trip over a planned bucket.
#include "runtime/fusion/buffer_pool.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "runtime/fusion/fusion_plan.hpp"
#include "runtime/fusion/pack.hpp"

namespace chorus {
namespace {

const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

buffer_pool_options options(std::size_t max_bytes, std::size_t threshold = 0) {
  buffer_pool_options o;
  o.max_bytes = max_bytes;
  o.fusion_threshold = threshold;
  return o;
}

std::size_t resident_pages(const std::byte* data, std::size_t bytes) {
  std::vector<unsigned char> vec((bytes + page - 1) / page);
  EXPECT_EQ(::mincore(const_cast<std::byte*>(data), bytes, vec.data()), 0);
  std::size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

TEST(buffer_pool, size_classes_are_powers_of_two_or_the_threshold) {
  buffer_pool pool(options(1 << 30, 3 * page * 100));
  EXPECT_EQ(pool.size_class(1), page);
  EXPECT_EQ(pool.size_class(page + 1), 2 * page);
  EXPECT_EQ(pool.size_class(100 * page), 128 * page);
  EXPECT_EQ(pool.size_class(200 * page), 256 * page);  // 256 pages < 300: still a power of two
  EXPECT_EQ(pool.size_class(257 * page), 300 * page);  // the threshold beats 512 pages
  EXPECT_EQ(pool.size_class(301 * page), 512 * page);  // above the threshold: powers again
}

TEST(buffer_pool, released_buffer_comes_back) {
  buffer_pool pool(options(1 << 24));
  std::byte* first = nullptr;
  {
    auto lease = pool.acquire(10000);
    ASSERT_TRUE(lease.ok()) << lease.error().to_string();
    first = lease->data();
    EXPECT_EQ(lease->size(), 10000u);
    EXPECT_EQ(lease->capacity(), pool.size_class(10000));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % page, 0u);
  }
  auto again = pool.acquire(9000);  // same size class
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), first);
  const auto st = pool.stats();
  EXPECT_EQ(st.allocations, 1u);
  EXPECT_EQ(st.reuses, 1u);
  EXPECT_EQ(st.leased_bytes, again->capacity());
  again->reset();
  EXPECT_FALSE(again.value());
  EXPECT_EQ(pool.stats().leased_bytes, 0u);
}

TEST(buffer_pool, moved_lease_returns_once) {
  buffer_pool pool(options(1 << 20));
  auto a = pool.acquire(100);
  ASSERT_TRUE(a.ok());
  buffer_lease moved = std::move(a.value());
  EXPECT_FALSE(a.value());
  buffer_lease other;
  other = std::move(moved);
  EXPECT_EQ(pool.stats().leased_bytes, page);
  other.reset();
  EXPECT_EQ(pool.stats().leased_bytes, 0u);
  EXPECT_EQ(pool.stats().buffers, 1u);
}

TEST(buffer_pool, buffers_are_pre_touched) {
  const std::size_t bytes = 8u << 20;
  buffer_pool pool(options(bytes));
  auto lease = pool.acquire(bytes);
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  EXPECT_EQ(resident_pages(lease->data(), bytes), bytes / page);
  std::memset(lease->data(), 0x5a, bytes);  // and writable end to end
}

TEST(buffer_pool, untouched_buffers_are_not_resident) {
  // The control for the test above: without pre-touch the kernel has not backed the pages.
  const std::size_t bytes = 8u << 20;
  auto o = options(bytes);
  o.pre_touch = false;
  buffer_pool pool(o);
  auto lease = pool.acquire(bytes);
  ASSERT_TRUE(lease.ok());
  EXPECT_LT(resident_pages(lease->data(), bytes), bytes / page / 2);
}

TEST(buffer_pool, cap_is_an_error_not_growth) {
  buffer_pool pool(options(4 * page));
  auto a = pool.acquire(2 * page);
  auto b = pool.acquire(2 * page);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = pool.acquire(1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), errc::invalid_argument);
  EXPECT_NE(c.error().message().find("cap of " + std::to_string(4 * page)), std::string::npos) << c.error().message();
  EXPECT_EQ(pool.stats().allocated_bytes, 4 * page);

  auto huge = pool.acquire(5 * page);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code(), errc::invalid_argument);
  EXPECT_EQ(pool.acquire(0).error().code(), errc::invalid_argument);
}

TEST(buffer_pool, free_buffers_make_room_under_the_cap) {
  buffer_pool pool(options(4 * page));
  {
    auto a = pool.acquire(page);
    auto b = pool.acquire(page);
    ASSERT_TRUE(a.ok() && b.ok());
  }
  auto big = pool.acquire(3 * page);  // class 4 pages: both free 1-page buffers must go
  ASSERT_TRUE(big.ok()) << big.error().to_string();
  EXPECT_EQ(pool.stats().allocated_bytes, 4 * page);
  EXPECT_EQ(pool.stats().buffers, 1u);
  big->reset();
  auto small = pool.acquire(page);  // the cap is full, so the larger free buffer serves it
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->capacity(), 4 * page);
}

TEST(buffer_pool, lease_outlives_pool) {
  buffer_lease kept;
  {
    buffer_pool pool(options(1 << 20));
    auto lease = pool.acquire(64);
    ASSERT_TRUE(lease.ok());
    kept = std::move(lease.value());
  }
  std::memset(kept.data(), 1, kept.size());
  kept.reset();  // returns into the pool's state, freed with it
}

TEST(buffer_pool, two_threads_share_one_pool) {
  const std::size_t classes = 4, rounds = 2000;
  buffer_pool pool(options(2 * (page + 2 * page + 4 * page + 8 * page)));
  std::atomic<int> failures{0};
  auto work = [&](int seed) {
    for (std::size_t i = 0; i < rounds; ++i) {
      const std::size_t bytes = (page << ((i + seed) % classes)) - 1;
      auto lease = pool.acquire(bytes);
      if (!lease.ok()) {
        ++failures;
        continue;
      }
      const auto mark = static_cast<unsigned char>(seed * 16 + i);
      std::memset(lease->data(), mark, bytes);
      if (static_cast<unsigned char>(lease->data()[bytes - 1]) != mark) ++failures;  // nobody else wrote here
    }
  };
  std::thread t1(work, 1), t2(work, 2);
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
  const auto st = pool.stats();
  EXPECT_EQ(st.leased_bytes, 0u);
  EXPECT_LE(st.allocated_bytes, pool.options().max_bytes);
  EXPECT_LE(st.allocations, 8u);  // reused, not reallocated per acquire
}

TEST(pack, round_trip_through_a_fused_bucket) {
  std::vector<fusion_item> batch;
  std::map<uint32_t, std::vector<float>> in, out;
  const std::size_t counts[] = {3, 17, 0, 1, 64, 5};
  for (uint32_t id = 0; id < 6; ++id) {
    fusion_item it;
    it.id = 10 + id;
    it.bytes = counts[id] * sizeof(float);
    batch.push_back(it);
    in[it.id].clear();
    for (std::size_t e = 0; e < counts[id]; ++e) in[it.id].push_back(static_cast<float>(id * 1000 + e));
    out[it.id].assign(counts[id], -1.0f);
  }
  const auto buckets = plan_buckets(batch, 1 << 20);
  ASSERT_EQ(buckets.size(), 1u);
  const bucket& b = buckets.front();
  std::vector<std::byte> fused(b.bytes, std::byte{0xff});
  ASSERT_TRUE(pack(b, [&](uint32_t id) -> const void* { return in.at(id).data(); }, fused));
  // Gaps between members are zeroed.
  std::size_t end = 0;
  for (const auto& m : b.members) {
    for (std::size_t i = end; i < m.offset; ++i) EXPECT_EQ(fused[i], std::byte{0}) << "byte " << i;
    end = m.offset + m.bytes;
  }
  ASSERT_TRUE(unpack(b, fused, [&](uint32_t id) -> void* { return out.at(id).data(); }));
  EXPECT_EQ(in, out);
}

TEST(pack, errors_name_the_problem_and_copy_nothing) {
  fusion_item a, c;
  a.id = 1;
  a.bytes = 8;
  c.id = 2;
  c.bytes = 8;
  const auto b = plan_buckets({a, c}, 1024).front();
  std::vector<std::byte> small(b.bytes - 1), fused(b.bytes, std::byte{7});
  float x[2] = {1, 2};
  auto st = pack(b, [&](uint32_t) -> const void* { return x; }, small);
  EXPECT_EQ(st.code(), errc::invalid_argument);
  st = pack(b, [&](uint32_t id) -> const void* { return id == 2 ? nullptr : x; }, fused);
  EXPECT_EQ(st.code(), errc::internal);
  EXPECT_NE(st.message().find("tensor id 2"), std::string::npos) << st.message();
  EXPECT_EQ(fused[0], std::byte{7});  // untouched
  EXPECT_EQ(unpack(b, small, [&](uint32_t) -> void* { return x; }).code(), errc::invalid_argument);
}

TEST(pack, in_place_unpack_onto_itself_is_a_no_op) {
  fusion_item a;
  a.id = 4;
  a.bytes = 16;
  const auto b = plan_buckets({a}, 0).front();
  ASSERT_TRUE(b.in_place);
  std::vector<std::byte> buf(16, std::byte{3});
  EXPECT_TRUE(unpack(b, buf, [&](uint32_t) -> void* { return buf.data(); }));
  EXPECT_EQ(buf[15], std::byte{3});
}

}  // namespace
}  // namespace chorus
