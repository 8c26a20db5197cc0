// The shared-memory ring (runtime/transport/shm/): a segment found only with its nonce and
// unnamed once opened, the placement rule both sides follow (wrap to the start when a payload
// would run past the end), room handed back only by release(), and payloads intact across it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "runtime/transport/shm/ring.hpp"
#include "runtime/transport/shm/segment.hpp"

namespace chorus::shm {
namespace {

std::string unique_name(const char* what) {
  static int n = 0;
  return "/chorus-test-" + std::to_string(::getpid()) + "-" + what + "-" + std::to_string(++n);
}

struct ring_pair {
  std::unique_ptr<ring_writer> out;
  std::unique_ptr<ring_reader> in;
};

ring_pair make_ring(std::size_t capacity) {
  auto name = unique_name("ring");
  auto created = segment::create(name, capacity, 42);
  EXPECT_TRUE(static_cast<bool>(created)) << created.error().to_string();
  auto opened = segment::open(name, 42);
  EXPECT_TRUE(static_cast<bool>(opened)) << opened.error().to_string();
  return {std::make_unique<ring_writer>(std::move(*created)), std::make_unique<ring_reader>(std::move(*opened))};
}

TEST(shm_segment, is_found_only_with_its_nonce_and_unnamed_once_opened) {
  auto name = unique_name("seg");
  auto created = segment::create(name, 8192, 7);
  ASSERT_TRUE(static_cast<bool>(created)) << created.error().to_string();
  auto wrong = segment::open(name, 8);
  ASSERT_FALSE(static_cast<bool>(wrong));
  EXPECT_EQ(wrong.error().code(), errc::protocol);
  EXPECT_EQ(wrong.error().message(), "shared-memory segment " + name + " is not the one announced");
  auto opened = segment::open(name, 7);  // the wrong guess did not remove it
  ASSERT_TRUE(static_cast<bool>(opened)) << opened.error().to_string();
  EXPECT_EQ((*opened)->capacity(), 8192u);
  auto again = segment::open(name, 7);  // the receiver removed the name
  ASSERT_FALSE(static_cast<bool>(again));
  EXPECT_EQ(again.error().code(), errc::config);
  EXPECT_NE(again.error().message().find("cannot open shared-memory segment " + name), std::string::npos)
      << again.error().message();
  // Both mappings are the same memory.
  (*created)->data()[100] = std::byte{9};
  EXPECT_EQ((*opened)->data()[100], std::byte{9});
}

TEST(shm_segment, one_of_another_user_is_refused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a segment to another user";
  auto name = unique_name("uid");
  auto created = segment::create(name, 4096, 3);
  ASSERT_TRUE(static_cast<bool>(created));
  ASSERT_EQ(::chown(("/dev/shm" + name).c_str(), 65534, 65534), 0);
  auto opened = segment::open(name, 3);
  ASSERT_FALSE(static_cast<bool>(opened));
  EXPECT_EQ(opened.error().code(), errc::protocol);
  EXPECT_EQ(opened.error().message(),
            "shared-memory segment " + name + " belongs to uid 65534, not to this process's uid 0");
}

TEST(shm_segment, creating_an_existing_name_fails) {
  auto name = unique_name("dup");
  auto first = segment::create(name, 4096, 1);
  ASSERT_TRUE(static_cast<bool>(first));
  auto second = segment::create(name, 4096, 2);
  ASSERT_FALSE(static_cast<bool>(second));
  EXPECT_NE(second.error().message().find("cannot create shared-memory segment " + name), std::string::npos);
}

TEST(shm_ring, takes_nothing_empty_or_larger_than_itself) {
  auto r = make_ring(4096);
  EXPECT_EQ(r.out->reserve(0), nullptr);
  EXPECT_EQ(r.out->reserve(4097), nullptr);
  EXPECT_EQ(r.in->next(4097), nullptr);
  EXPECT_NE(r.out->reserve(4096), nullptr);  // exactly full
}

TEST(shm_ring, room_comes_back_only_when_the_reader_releases) {
  // The two sides map the segment at different addresses: compare places within a side, and
  // bytes across them.
  auto r = make_ring(4096);
  std::byte* a = r.out->reserve(3000);
  ASSERT_NE(a, nullptr);
  a[0] = std::byte{1};
  EXPECT_EQ(r.out->reserve(1200), nullptr);  // 3000 + 1200 > 4096
  std::byte* b = r.out->reserve(1000);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b, a + 3000);
  b[0] = std::byte{2};
  const std::byte* ra = r.in->next(3000);
  EXPECT_EQ(ra[0], std::byte{1});  // same place, by the same rule
  EXPECT_EQ(r.out->reserve(2000), nullptr);  // read but not released
  r.in->release();
  // 2000 does not fit between 4000 and the end: it wraps to the start, where room is back.
  std::byte* c = r.out->reserve(2000);
  EXPECT_EQ(c, a);
  c[0] = std::byte{3};
  const std::byte* rb = r.in->next(1000);
  EXPECT_EQ(rb, ra + 3000);
  EXPECT_EQ(rb[0], std::byte{2});
  EXPECT_EQ(r.in->next(2000), ra);  // the reader skips the same tail
  EXPECT_EQ(ra[0], std::byte{3});
}

TEST(shm_ring, random_payload_sizes_arrive_intact_in_order) {
  auto r = make_ring(64 * 1024);
  std::mt19937 rng(1234);
  std::vector<std::vector<std::byte>> pending;  // written, not yet read
  std::size_t written = 0, read = 0;
  auto payload = [](std::size_t k, std::size_t len) {
    std::vector<std::byte> v(len);
    for (std::size_t i = 0; i < len; ++i) v[i] = static_cast<std::byte>((k * 31 + i) & 0xff);
    return v;
  };
  while (read < 2000) {
    bool write = written < 2000 && (pending.empty() || rng() % 3 != 0);
    if (write) {
      std::size_t len = 1 + rng() % (20 * 1024);
      std::byte* at = r.out->reserve(len);
      if (at) {
        auto v = payload(written++, len);
        std::memcpy(at, v.data(), len);
        pending.push_back(std::move(v));
        continue;
      }
      ASSERT_FALSE(pending.empty()) << "an empty ring refused " << len << " bytes";
    }
    const std::byte* at = r.in->next(pending.front().size());
    ASSERT_NE(at, nullptr);
    ASSERT_EQ(std::memcmp(at, pending.front().data(), pending.front().size()), 0) << "payload " << read;
    r.in->release();
    pending.erase(pending.begin());
    ++read;
  }
}

}  // namespace
}  // namespace chorus::shm
