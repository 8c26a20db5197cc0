// The shared-memory mailbox (runtime/transport/shm/mailbox.hpp) in one process: posts arrive in
// their slots with their header, a slot is free again only once released, a damaged slot is a
// protocol error naming the peer, and a sleeping reader wakes for a post, for wake(), and not
// at all when the post was already there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/transport/shm/mailbox.hpp"

namespace chorus::shm {
namespace {

using namespace std::chrono_literals;

struct box_pair {
  std::unique_ptr<mailbox_writer> out;
  std::unique_ptr<mailbox_reader> in;
  segment* raw = nullptr;  // the writer's mapping, for damaging it on purpose
};

box_pair make_pair_of_boxes(int peer = 7) {
  std::random_device rd;
  const uint64_t nonce = (uint64_t{rd()} << 32) | rd();
  const std::string name = "/chorus-mailbox-test-" + std::to_string(::getpid()) + "-" + std::to_string(nonce);
  auto created = segment::create(name, mailbox_capacity(), nonce);
  EXPECT_TRUE(created) << created.error().to_string();
  auto opened = segment::open(name, nonce);
  EXPECT_TRUE(opened) << opened.error().to_string();
  box_pair b;
  b.raw = created->get();
  b.out = std::make_unique<mailbox_writer>(std::move(*created));
  b.in = std::make_unique<mailbox_reader>(std::move(*opened), peer);
  return b;
}

TEST(shm_mailbox, posts_arrive_with_their_header_and_slots_come_back_when_released) {
  auto b = make_pair_of_boxes();
  std::vector<std::byte> one(mailbox_slot_bytes, std::byte{1}), two(100, std::byte{2});
  mail m;
  auto got = b.in->take(1, m);
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);  // nothing yet
  ASSERT_TRUE(b.out->has_room(1));
  b.out->post(1, 0xabc, one.data(), one.size());
  ASSERT_TRUE(b.out->has_room(2));
  b.out->post(2, 0xdef, two.data(), two.size());
  EXPECT_FALSE(b.out->has_room(3)) << "post 3 would overwrite post 1 before the reader released it";
  got = b.in->take(1, m);
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(m.bytes, one.size());
  EXPECT_EQ(m.tag, 0xabcu);
  EXPECT_EQ(std::memcmp(m.payload, one.data(), one.size()), 0);
  b.in->release(1);
  EXPECT_TRUE(b.out->has_room(3));
  got = b.in->take(2, m);
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(m.bytes, 100u);
  EXPECT_EQ(m.tag, 0xdefu);
  EXPECT_EQ(std::memcmp(m.payload, two.data(), two.size()), 0);
}

TEST(shm_mailbox, a_post_gathered_from_parts_arrives_as_their_concatenation) {
  auto b = make_pair_of_boxes();
  std::vector<std::byte> x(1000, std::byte{3}), y(7, std::byte{4}), z(mailbox_slot_bytes - 1007, std::byte{5});
  const std::vector<std::span<const std::byte>> parts{x, {}, y, z};
  b.out->post(1, 0x77, parts, 9);
  mail m;
  auto got = b.in->take(1, m);
  ASSERT_TRUE(got && *got);
  EXPECT_EQ(m.bytes, mailbox_slot_bytes);
  EXPECT_EQ(m.tag, 0x77u);
  EXPECT_EQ(m.call, 9u);
  std::vector<std::byte> want = x;
  want.insert(want.end(), y.begin(), y.end());
  want.insert(want.end(), z.begin(), z.end());
  EXPECT_EQ(std::memcmp(m.payload, want.data(), want.size()), 0);
}

TEST(shm_mailbox, a_damaged_slot_is_a_protocol_error_naming_the_peer) {
  auto b = make_pair_of_boxes(5);
  uint64_t x = 0;
  b.out->post(1, 0, &x, sizeof x);
  uint64_t wrong_k = 9;
  std::memcpy(b.raw->data() + 64 + mailbox_slot_bytes, &wrong_k, sizeof wrong_k);  // slot 1's k
  mail m;
  auto got = b.in->take(1, m);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().to_string(),
            "protocol: rank 5's shared-memory mailbox holds post 9 in the slot (expected post 1, published 1)");
  b.raw->published().store(5);
  got = b.in->take(1, m);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().to_string(),
            "protocol: rank 5's shared-memory mailbox ran more than one post ahead (expected post 1, published 5)");
}

TEST(shm_mailbox, a_sleeping_reader_wakes_for_a_post_and_for_wake) {
  auto b = make_pair_of_boxes();
  std::atomic<bool> stop{false};
  // A post while the reader sleeps ends the sleep long before its 5 s limit.
  auto t0 = std::chrono::steady_clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(20ms);
    uint64_t x = 42;
    b.out->post(1, 0, &x, sizeof x);
  });
  mail m;
  while (!*b.in->take(1, m)) b.in->sleep(1, stop, 5s);
  writer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  b.in->release(1);
  // wake() (what interrupt() calls) ends a sleep with no post.
  t0 = std::chrono::steady_clock::now();
  std::thread waker([&] {
    std::this_thread::sleep_for(20ms);
    stop.store(true);
    b.in->wake();
  });
  while (!stop.load()) b.in->sleep(2, stop, 5s);
  waker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  // A post already there, or a stop already set: no sleep at all.
  uint64_t y = 1;
  b.out->post(2, 0, &y, sizeof y);
  stop.store(false);
  t0 = std::chrono::steady_clock::now();
  b.in->sleep(2, stop, 5s);
  stop.store(true);
  b.in->sleep(3, stop, 5s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

}  // namespace
}  // namespace chorus::shm
