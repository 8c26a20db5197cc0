// The shared-memory ring (runtime/transport/shm/): a segment found only with its nonce and
// unnamed once opened; frames (header and payload) visible only once published, the placement
// rule both sides follow (skip to the start, with or without a padding header), room handed
// back only by consume(), frames intact across it, one doorbell per sleep, and a ring a hostile
// peer wrote refused with a protocol error instead of being read out of bounds.
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
  return {std::make_unique<ring_writer>(std::move(*created)),
          std::make_unique<ring_reader>(std::move(*opened), wire::frame_limits{0x77, 64u << 20})};
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

constexpr uint64_t job = 0x77;
const wire::frame_limits limits{job, 64u << 20};

wire::frame_header data_frame(uint64_t seq, uint32_t length) {
  wire::frame_header h;
  h.job_id = job;
  h.sequence = seq;
  h.length = length;
  return h;
}

std::vector<std::byte> bytes_of(uint64_t k, std::size_t len) {
  std::vector<std::byte> v(len);
  for (std::size_t i = 0; i < len; ++i) v[i] = static_cast<std::byte>((k * 31 + i) & 0xff);
  return v;
}

TEST(shm_ring, takes_no_frame_larger_than_itself) {
  auto r = make_ring(4096);
  EXPECT_FALSE(r.out->fits(4097 - wire::frame_header_size));
  EXPECT_TRUE(r.out->fits(4096 - wire::frame_header_size));
  auto p = bytes_of(1, 4096);
  EXPECT_FALSE(r.out->put(data_frame(1, 4097 - wire::frame_header_size), p.data()));
  EXPECT_TRUE(r.out->put(data_frame(1, 4096 - wire::frame_header_size), p.data()));  // exactly full
}

TEST(shm_ring, a_frame_is_seen_only_once_published_and_room_comes_back_only_on_consume) {
  auto r = make_ring(4096);
  auto a = bytes_of(1, 3000), b = bytes_of(2, 900), c = bytes_of(3, 2000);
  ASSERT_TRUE(r.out->put(data_frame(1, 3000), a.data()));
  ring_frame f;
  auto got = r.in->next(f);
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_FALSE(*got);  // not published yet
  EXPECT_FALSE(r.out->publish());  // nobody sleeps: no doorbell
  ASSERT_TRUE(r.out->put(data_frame(2, 900), b.data()));  // 3040 + 940 <= 4096
  EXPECT_FALSE(r.out->put(data_frame(3, 2000), c.data()));  // no room
  r.out->publish();
  got = r.in->next(f);
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(f.header.sequence, 1u);
  ASSERT_EQ(f.header.length, 3000u);
  EXPECT_EQ(std::memcmp(f.payload, a.data(), a.size()), 0);
  EXPECT_FALSE(r.out->put(data_frame(3, 2000), c.data()));  // read but not consumed
  r.in->consume();
  // 2040 bytes do not fit between 3980 and the end: the frame goes to the start (the 116 bytes
  // left hold a padding header), where room is back.
  ASSERT_TRUE(r.out->put(data_frame(3, 2000), c.data()));
  r.out->publish();
  got = r.in->next(f);
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(f.header.sequence, 2u);
  EXPECT_EQ(std::memcmp(f.payload, b.data(), b.size()), 0);
  r.in->consume();
  got = r.in->next(f);
  ASSERT_TRUE(got && *got) << "the reader did not skip the padding";
  EXPECT_EQ(f.header.sequence, 3u);
  EXPECT_EQ(std::memcmp(f.payload, c.data(), c.size()), 0);
  r.in->consume();
  got = r.in->next(f);
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
}

TEST(shm_ring, a_tail_too_short_for_a_header_is_skipped_without_one) {
  auto r = make_ring(4096);
  auto p = bytes_of(1, 4096);
  // 4096 - 4070 = 26 bytes left, fewer than a header: skipped silently by both sides.
  ASSERT_TRUE(r.out->put(data_frame(1, 4070 - wire::frame_header_size), p.data()));
  r.out->publish();
  ring_frame f;
  ASSERT_TRUE(*r.in->next(f));
  r.in->consume();
  ASSERT_TRUE(r.out->put(data_frame(2, 100), p.data()));
  r.out->publish();
  auto got = r.in->next(f);
  ASSERT_TRUE(got && *got) << (got ? "" : got.error().to_string());
  EXPECT_EQ(f.header.sequence, 2u);
  EXPECT_EQ(std::memcmp(f.payload, p.data(), 100), 0);
}

TEST(shm_ring, one_doorbell_per_sleep) {
  auto r = make_ring(4096);
  auto p = bytes_of(1, 10);
  r.in->set_sleeping(true);
  EXPECT_FALSE(r.out->publish());  // nothing new: no doorbell
  ASSERT_TRUE(r.out->put(data_frame(1, 10), p.data()));
  EXPECT_TRUE(r.out->publish());
  ASSERT_TRUE(r.out->put(data_frame(2, 10), p.data()));
  EXPECT_FALSE(r.out->publish());  // already rung for this sleep
  EXPECT_TRUE(r.in->pending());
  r.in->set_sleeping(false);
  r.in->set_sleeping(true);
  ASSERT_TRUE(r.out->put(data_frame(3, 10), p.data()));
  EXPECT_TRUE(r.out->publish());
}

TEST(shm_ring, random_frame_sizes_arrive_intact_in_order) {
  auto r = make_ring(64 * 1024);
  std::mt19937 rng(1234);
  std::vector<std::vector<std::byte>> pending;  // put, not yet read
  std::size_t written = 0, read = 0;
  while (read < 2000) {
    bool write = written < 2000 && (pending.empty() || rng() % 3 != 0);
    if (write) {
      std::size_t len = rng() % (20 * 1024);
      auto v = bytes_of(written, len);
      if (r.out->put(data_frame(written, static_cast<uint32_t>(len)), v.data())) {
        ++written;
        pending.push_back(std::move(v));
        if (rng() % 2) r.out->publish();
        continue;
      }
      ASSERT_FALSE(pending.empty()) << "an empty ring refused " << len << " bytes";
    }
    r.out->publish();
    ring_frame f;
    auto got = r.in->next(f);
    ASSERT_TRUE(got) << got.error().to_string();
    ASSERT_TRUE(*got);
    ASSERT_EQ(f.header.sequence, read);
    ASSERT_EQ(f.header.length, pending.front().size());
    ASSERT_EQ(std::memcmp(f.payload, pending.front().data(), pending.front().size()), 0) << "frame " << read;
    r.in->consume();
    pending.erase(pending.begin());
    ++read;
  }
}

// A hostile peer controls the segment: the published counter and every byte of the ring.
struct raw_ring {
  std::unique_ptr<segment> writer_side;
  std::unique_ptr<ring_reader> in;
};
raw_ring make_raw(std::size_t capacity) {
  auto name = unique_name("raw");
  auto created = segment::create(name, capacity, 5);
  EXPECT_TRUE(static_cast<bool>(created));
  auto opened = segment::open(name, 5);
  EXPECT_TRUE(static_cast<bool>(opened));
  return {std::move(*created), std::make_unique<ring_reader>(std::move(*opened), limits)};
}

std::string refusal(ring_reader& in) {
  ring_frame f;
  auto got = in.next(f);
  if (got) return *got ? "accepted" : "nothing";
  EXPECT_EQ(got.error().code(), errc::protocol);
  return got.error().message();
}

TEST(shm_ring, what_a_hostile_peer_writes_is_refused_not_read_out_of_bounds) {
  {  // a published counter past the ring's capacity
    auto r = make_raw(4096);
    r.writer_side->published().store(1u << 20);
    EXPECT_NE(refusal(*r.in).find("claims more bytes than it holds"), std::string::npos) << refusal(*r.in);
  }
  {  // garbage instead of a header
    auto r = make_raw(4096);
    std::memset(r.writer_side->data(), 0xab, 64);
    r.writer_side->published().store(64);
    EXPECT_NE(refusal(*r.in).find("holds a bad frame: "), std::string::npos) << refusal(*r.in);
  }
  {  // a header whose payload runs past the published bytes
    auto r = make_raw(4096);
    wire::encode(data_frame(1, 1000), r.writer_side->data());
    r.writer_side->published().store(wire::frame_header_size + 10);
    EXPECT_NE(refusal(*r.in).find("holds a frame that does not fit"), std::string::npos) << refusal(*r.in);
  }
  {  // a header whose payload runs past the ring's end
    auto r = make_raw(4096);
    wire::encode(data_frame(1, 5000), r.writer_side->data());
    r.writer_side->published().store(4096);
    EXPECT_NE(refusal(*r.in).find("holds a frame that does not fit"), std::string::npos) << refusal(*r.in);
  }
  {  // a frame of another job
    auto r = make_raw(4096);
    auto h = data_frame(1, 8);
    h.job_id = job + 1;
    wire::encode(h, r.writer_side->data());
    r.writer_side->published().store(wire::frame_header_size + 8);
    EXPECT_NE(refusal(*r.in).find("holds a bad frame: "), std::string::npos) << refusal(*r.in);
  }
  {  // a frame of another kind (a goodbye has no business in a ring)
    auto r = make_raw(4096);
    auto h = data_frame(1, 0);
    h.kind = wire::frame_kind::goodbye;
    wire::encode(h, r.writer_side->data());
    r.writer_side->published().store(wire::frame_header_size);
    EXPECT_NE(refusal(*r.in).find("holds a frame of another kind"), std::string::npos) << refusal(*r.in);
  }
  {  // a published counter that ends inside a header
    auto r = make_raw(4096);
    wire::encode(data_frame(1, 0), r.writer_side->data());
    r.writer_side->published().store(10);
    EXPECT_NE(refusal(*r.in).find("ends inside a frame header"), std::string::npos) << refusal(*r.in);
  }
}

}  // namespace
}  // namespace chorus::shm
