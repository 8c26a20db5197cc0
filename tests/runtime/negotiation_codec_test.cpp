// Value types of negotiation: tensor specs (comparison, printing, codec), dynamic_bitmap,
// and gossip_message (merge laws and codec). Randomised cases print their seed.
#include <gtest/gtest.h>

#include <limits>
#include <span>

#include <cstdlib>
#include <iostream>
#include <random>

#include "runtime/negotiation/bitmap.hpp"
#include "runtime/negotiation/diagnostics.hpp"
#include "runtime/negotiation/message.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::negotiation {
namespace {

uint64_t test_seed(uint64_t fallback) {
  const char* env = std::getenv("CHORUS_TEST_SEED");
  uint64_t seed = env ? std::strtoull(env, nullptr, 10) : fallback;
  std::cout << "seed=" << seed << " (CHORUS_TEST_SEED=" << seed << " re-runs it)\n";
  return seed;
}

tensor_spec sample_spec() {
  return tensor_spec{"fc1.weight", collective_kind::broadcast, dtype::bf16, {512, 256}, reduce_op::max, 3,
                     device_kind::cuda, 2};
}

TEST(TensorSpec, SizesAndPrinting) {
  auto s = sample_spec();
  EXPECT_EQ(s.num_elements(), 512 * 256);
  EXPECT_EQ(s.byte_size(), 512 * 256 * 2);
  EXPECT_EQ(tensor_spec{}.num_elements(), 1);  // scalar
  EXPECT_EQ(format_shape(s.shape), "[512,256]");
  EXPECT_EQ(format_shape({}), "[]");
  EXPECT_EQ(describe(s), "broadcast('fc1.weight') in process set 2");
  s.process_set = 0;
  EXPECT_EQ(describe(s), "broadcast('fc1.weight')");
}

TEST(TensorSpec, FirstDifferenceNamesTheField) {
  auto a = sample_spec();
  EXPECT_FALSE(first_difference(a, a));
  auto differ = [&](auto change) { auto b = a; change(b); return first_difference(a, b).value_or("none"); };
  EXPECT_EQ(differ([](tensor_spec& b) { b.shape = {512, 128}; }), "shape");
  EXPECT_EQ(differ([](tensor_spec& b) { b.type = dtype::f32; }), "dtype");
  EXPECT_EQ(differ([](tensor_spec& b) { b.op = reduce_op::sum; }), "op");
  EXPECT_EQ(differ([](tensor_spec& b) { b.root = 0; }), "root");
  EXPECT_EQ(differ([](tensor_spec& b) { b.kind = collective_kind::allgather; }), "collective");
  EXPECT_EQ(differ([](tensor_spec& b) { b.device = device_kind::cpu; }), "device");
  EXPECT_EQ(differ([](tensor_spec& b) { b.process_set = 0; }), "process set");
  EXPECT_EQ(differ([](tensor_spec& b) { b.transient = true; }), "transient");
  EXPECT_EQ(differ([](tensor_spec& b) { b.name = "other"; }), "none");
  EXPECT_EQ(field_value(a, "transient"), "false");
  EXPECT_EQ(field_value(a, "shape"), "[512,256]");
  EXPECT_EQ(field_value(a, "dtype"), "bf16");
  EXPECT_EQ(field_value(a, "device"), "cuda");
}

TEST(TensorSpec, CodecRoundTripsAndReportsTruncation) {
  auto s = sample_spec();
  s.shape = {0, 1, -0, 1LL << 40};
  auto bytes = encode(s);
  auto back = decode_tensor_spec(bytes);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back.value(), s);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto cut = decode_tensor_spec(std::span(bytes).first(n));
    ASSERT_FALSE(cut.ok()) << "prefix of " << n << " bytes decoded";
    EXPECT_EQ(cut.error().code(), errc::protocol);
    EXPECT_NE(cut.error().message().find("truncated"), std::string::npos) << cut.error().message();
  }
  bytes.push_back(std::byte{0});
  EXPECT_FALSE(decode_tensor_spec(bytes).ok());
  auto bad = encode(s);
  bad[1] = std::byte{42};  // dtype
  auto err = decode_tensor_spec(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().message(), "negotiation codec: unknown dtype 42 at byte 4 reading spec dtype");
}

// The transient flag rides in the device byte's top bit: a transient spec round-trips, sorts
// apart from its non-transient twin, and a non-transient spec encodes as before (same bytes).
// A fuzzing find (tests/fuzz/corpus/tensor_spec/nan_prescale): a NaN prescale decoded, and then
// the spec did not equal itself after a round trip. Non-finite prescales are refused from the wire
// (the API refuses them too, naming the tensor).
TEST(TensorSpec, ANonFinitePrescaleFromTheWireIsRefused) {
  const uint8_t nan_prescale[] = {0x01, 0x02, 0x00, 0x41, 0x01, 0x5b, 0x00, 0x00, 0xfb, 0xff, 0xfb, 0xff, 0x0f};
  auto s = decode_tensor_spec(std::as_bytes(std::span(nan_prescale)));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("spec prescale"), std::string::npos) << s.error().to_string();
  EXPECT_NE(s.error().message().find("is not finite"), std::string::npos) << s.error().to_string();
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    tensor_spec t;
    t.name = "g";
    t.kind = collective_kind::allreduce;
    t.wire = compression::fp16;
    t.prescale = bad;
    EXPECT_FALSE(decode_tensor_spec(encode(t)).ok()) << bad;
  }
  tensor_spec ok;
  ok.name = "g";
  ok.prescale = 0.5f;
  ok.wire = compression::fp16;
  auto back = decode_tensor_spec(encode(ok));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->prescale, 0.5f);
}

TEST(TensorSpec, TransientFlagRoundTripsInTheDeviceByte) {
  auto plain = sample_spec();
  auto once = plain;
  once.transient = true;
  auto a = encode(plain), b = encode(once);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a[3], std::byte{static_cast<uint8_t>(device_kind::cuda)});
  EXPECT_EQ(b[3], std::byte{static_cast<uint8_t>(0x80 | static_cast<uint8_t>(device_kind::cuda))});
  auto back = decode_tensor_spec(b);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back.value(), once);
  EXPECT_TRUE(back.value().transient);
  EXPECT_FALSE(decode_tensor_spec(a).value().transient);
  EXPECT_NE(plain, once);
  EXPECT_TRUE(spec_less(plain, once) != spec_less(once, plain));
  b[3] = std::byte{0x80 | 5};  // transient, unknown device
  auto err = decode_tensor_spec(b);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().message().find("unknown device 5"), std::string::npos) << err.error().message();
}

TEST(DynamicBitmap, SetTestCountAndMerges) {
  dynamic_bitmap a;
  a.set(3);
  a.set(70);
  EXPECT_EQ(a.size(), 71u);
  EXPECT_TRUE(a.test(70) && a.test(3) && !a.test(4) && !a.test(500));
  EXPECT_EQ(a.count(), 2u);
  dynamic_bitmap b(130, true);
  EXPECT_EQ(b.count(), 130u);
  auto c = a;
  c.and_with(b);
  EXPECT_EQ(c.to_vector(), (std::vector<uint32_t>{3, 70}));
  EXPECT_EQ(c.size(), 130u);
  b.and_with(a);  // bits past a's size read as 0
  EXPECT_EQ(b.to_vector(), (std::vector<uint32_t>{3, 70}));
  dynamic_bitmap d;
  d.set(1);
  d.or_with(a);
  EXPECT_EQ(d.to_vector(), (std::vector<uint32_t>{1, 3, 70}));
  d.and_not(a);
  EXPECT_EQ(d.to_vector(), (std::vector<uint32_t>{1}));
  d.resize(1);
  EXPECT_TRUE(d.none());
  EXPECT_EQ(d, dynamic_bitmap(1));
  std::vector<std::size_t> seen;
  a.for_each_set([&](std::size_t i) { seen.push_back(i); });
  EXPECT_EQ(seen, (std::vector<std::size_t>{3, 70}));
}

TEST(DynamicBitmap, CodecRoundTripsAndRejectsBadInput) {
  dynamic_bitmap a(77);
  for (std::size_t i : {0, 9, 63, 64, 76}) a.set(i);
  auto bytes = encode(a);
  EXPECT_EQ(bytes.size(), 1u + 10u);
  auto back = decode_bitmap(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), a);
  EXPECT_FALSE(decode_bitmap(std::span(bytes).first(5)).ok());
  bytes.back() = std::byte{0xff};  // bits past the size
  EXPECT_FALSE(decode_bitmap(bytes).ok());
}

TEST(Diagnostics, RankRanges) {
  dynamic_bitmap r;
  EXPECT_EQ(format_ranks(r), "no rank");
  r.set(3);
  EXPECT_EQ(format_ranks(r), "rank 3");
  for (int i : {0, 1, 2, 5, 7, 8, 9}) r.set(i);
  EXPECT_EQ(format_ranks(r), "ranks 0-3,5,7-9");
  EXPECT_EQ(format_ranks(complement(r, 11)), "ranks 4,6,10");
}

gossip_message random_message(std::mt19937_64& rng, int ranks) {
  gossip_message m;
  m.ready_and = dynamic_bitmap(20);
  m.ready_or = dynamic_bitmap(20);
  for (int i = 0; i < 20; ++i) {
    if (rng() % 2) m.ready_and.set(i);
    if (rng() % 2) m.ready_or.set(i);
    if (rng() % 5 == 0) m.stall_query.set(i);
    if (rng() % 9 == 0) m.stall_abort.set(i);
  }
  const int contributor = static_cast<int>(rng() % ranks);
  for (int k = 0; k < 3; ++k) {
    tensor_spec s{"t" + std::to_string(rng() % 4), collective_kind::allreduce, dtype::f32,
                  {static_cast<int64_t>(rng() % 2 + 1)}, reduce_op::sum, -1, device_kind::cpu, 0};
    announcement a{s, {}};
    a.ranks.set(contributor);
    gossip_message one;
    one.announced.push_back(a);
    merge(m, one);  // keeps the sorted order
  }
  for (int k = 0; k < 2; ++k) {
    gossip_message one;
    one.reports.push_back({static_cast<uint32_t>(rng() % 5), {}});
    one.reports.back().ranks.set(contributor);
    one.stalled_names.push_back("t" + std::to_string(rng() % 4));
    if (rng() % 3 == 0) one.abort_names.push_back("t" + std::to_string(rng() % 4));
    merge(m, one);
  }
  if (rng() % 2) m.score_min = static_cast<double>(rng() % 100);
  if (rng() % 2) {  // the autotuner's window: who scored, and the proposal digests
    gossip_message one;
    one.scored.set(contributor);
    one.digests.push_back({rng() % 3, {}});
    one.digests.back().ranks.set(contributor);
    merge(m, one);
  }
  m.shutdown = rng() % 7 == 0;
  return m;
}

TEST(GossipMessage, MergeIsIdempotentCommutativeAndAssociative) {
  std::mt19937_64 rng(test_seed(2024));
  for (int trial = 0; trial < 200; ++trial) {
    auto a = random_message(rng, 6), b = random_message(rng, 6), c = random_message(rng, 6);
    auto aa = a;
    merge(aa, a);
    EXPECT_EQ(aa, a);
    auto ab = a, ba = b;
    merge(ab, b);
    merge(ba, a);
    EXPECT_EQ(ab, ba);
    auto ab_c = ab, a_bc = a, bc = b;
    merge(ab_c, c);
    merge(bc, c);
    merge(a_bc, bc);
    EXPECT_EQ(ab_c, a_bc);
  }
}

TEST(GossipMessage, CodecRoundTripsAndReportsTruncation) {
  std::mt19937_64 rng(test_seed(7));
  for (int trial = 0; trial < 50; ++trial) {
    auto m = random_message(rng, 9);
    m.kind = message_kind::answer;
    m.cycle = rng();
    m.round = 3;
    m.from = 5;
    auto bytes = encode(m);
    auto back = decode_message(bytes);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(back.value(), m);
    for (std::size_t n = 0; n < bytes.size(); n += 3) {
      auto cut = decode_message(std::span(bytes).first(n));
      ASSERT_FALSE(cut.ok());
      EXPECT_EQ(cut.error().code(), errc::protocol);
    }
  }
}

TEST(GossipMessage, DecodedMemoryIsBoundedNotJustTheCount) {
  // 3 million announcements of the smallest spec (nine zero bytes each: 27 MB on the wire)
  // would decode to over 300 MB; the reader refuses past its budget instead.
  const std::size_t n = 3'000'000;
  std::vector<std::byte> bytes = {std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                  std::byte{0}, std::byte{0}};  // kind, cycle, round, from, open_next, 2 bitmaps
  const std::byte count[4] = {std::byte(0x80 | (n & 0x7f)), std::byte(0x80 | ((n >> 7) & 0x7f)),
                              std::byte(0x80 | ((n >> 14) & 0x7f)), std::byte((n >> 21) & 0x7f)};  // LEB128
  bytes.insert(bytes.end(), count, count + 4);
  bytes.resize(bytes.size() + n * 9, std::byte{0});
  auto m = decode_message(bytes);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), errc::protocol);
  EXPECT_NE(m.error().message().find("bytes of memory"), std::string::npos) << m.error().message();
}

TEST(TensorSpec, TooManyDimensionsAreRefused) {
  tensor_spec s;
  s.name = "x";
  s.shape.assign(max_spec_dims + 1, 1);
  auto back = decode_tensor_spec(encode(s));
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.error().message().find("dimensions"), std::string::npos) << back.error().message();
}

// Found by tests/fuzz/tensor_spec_fuzz.cpp: a peer's shape whose product overflows int64 made
// num_elements() signed-overflow (UB), and a joined rank sizes its filler from it.
TEST(TensorSpec, ShapesPastInt64OrNegativeAreRefusedByTheDecoderAndValidate) {
  tensor_spec s;
  s.name = "huge";
  s.type = dtype::f32;
  s.shape = {93285, 15178645473017275};
  EXPECT_FALSE(shape_fits(s.shape, s.type));
  auto back = decode_tensor_spec(encode(s));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.error().code(), errc::protocol);
  EXPECT_NE(back.error().message().find("shape [93285,15178645473017275] of 'huge'"), std::string::npos)
      << back.error().message();
  EXPECT_EQ(validate(s, 2).code(), errc::invalid_argument);
  s.shape = {int64_t{1} << 61};  // elements fit, bytes (x4) do not
  EXPECT_FALSE(decode_tensor_spec(encode(s)).ok());
  s.shape = {int64_t{1} << 60, 0, 2};  // an allgather row of 2^61 x 4 bytes: also refused
  EXPECT_FALSE(decode_tensor_spec(encode(s)).ok());
  s.shape = {-1, 4};
  EXPECT_FALSE(decode_tensor_spec(encode(s)).ok());
  s.shape = {int64_t{1} << 40, 1 << 20};  // 2^62 bytes: fits
  EXPECT_TRUE(decode_tensor_spec(encode(s)).ok());
  EXPECT_TRUE(validate(s, 2).ok());
}

}  // namespace
}  // namespace chorus::negotiation
