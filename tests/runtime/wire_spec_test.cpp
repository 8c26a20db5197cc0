// The wire options in a tensor's spec (runtime/negotiation/tensor_spec.hpp): compression, the
// NaN/Inf check and prescale survive the codec, old specs encode as before, a mismatch is named,
// bad bits are refused; and the fusion plan never fuses tensors whose wire options differ.
#include <gtest/gtest.h>

#include "runtime/compression/options.hpp"
#include "runtime/fusion/fusion_plan.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus {
namespace {

tensor_spec base() {
  tensor_spec s;
  s.name = "fc1.weight";
  s.type = dtype::f32;
  s.shape = {512, 256};
  s.op = reduce_op::average;
  return s;
}

TEST(WireSpec, OptionsRoundTripAndPlainSpecsEncodeAsBefore) {
  const auto plain = encode(base());
  for (compression c : {compression::none, compression::fp16, compression::bf16})
    for (nan_check k : {nan_check::off, nan_check::error, nan_check::skip})
      for (float p : {1.0f, 0.125f}) {
        auto s = base();
        s.wire = c;
        s.check = k;
        s.prescale = p;
        auto back = decode_tensor_spec(encode(s));
        ASSERT_TRUE(back.ok()) << back.error().to_string();
        EXPECT_EQ(*back, s);
        if (c == compression::none && k == nan_check::off && p == 1.0f) EXPECT_EQ(encode(s), plain);
      }
}

TEST(WireSpec, DifferencesAreNamed) {
  auto a = base(), b = base();
  b.wire = compression::fp16;
  EXPECT_EQ(first_difference(a, b).value_or(""), "compression");
  EXPECT_EQ(field_value(b, "compression"), "fp16");
  b = base();
  b.check = nan_check::skip;
  EXPECT_EQ(first_difference(a, b).value_or(""), "nan check");
  EXPECT_EQ(field_value(b, "nan check"), "skip");
  b = base();
  b.prescale = 0.5f;
  EXPECT_EQ(first_difference(a, b).value_or(""), "prescale");
}

TEST(WireSpec, PriorityRoundTripsIsNamedAndIsCheckedFromThePeer) {
  const auto plain = encode(base());
  for (int32_t p : {0, 1, -7, 150, INT32_MAX, INT32_MIN})
    for (float scale : {1.0f, 0.25f}) {
      auto s = base();
      s.priority = p;
      s.prescale = scale;
      s.wire = scale == 1.0f ? compression::none : compression::fp16;
      auto back = decode_tensor_spec(encode(s));
      ASSERT_TRUE(back.ok()) << back.error().to_string();
      EXPECT_EQ(*back, s);
      EXPECT_EQ(back->priority, p);
    }
  auto s = base();
  s.priority = 0;
  EXPECT_EQ(encode(s), plain);  // priority 0 encodes as before
  auto a = base(), b = base();
  b.priority = 3;
  EXPECT_EQ(first_difference(a, b).value_or(""), "priority");
  EXPECT_EQ(field_value(b, "priority"), "3");
  // A priority past int32 from a peer is refused, naming the tensor.
  s.priority = 1;
  auto bytes = encode(s);
  bytes.pop_back();  // svarint 1 is one byte: 2
  for (uint8_t b7 : {0xfe, 0xff, 0xff, 0xff, 0xff, 0x01}) bytes.push_back(std::byte(b7));
  auto bad = decode_tensor_spec(bytes);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("priority"), std::string::npos) << bad.error().to_string();
  EXPECT_NE(bad.error().message().find("fc1.weight"), std::string::npos) << bad.error().to_string();
  // The flag without the value: truncated.
  bytes = encode(s);
  bytes.pop_back();
  EXPECT_FALSE(decode_tensor_spec(bytes).ok());
}

TEST(WireSpec, UnknownCompressionBitsAreRefused) {
  auto bytes = encode(base());
  bytes[2] = std::byte(static_cast<uint8_t>(bytes[2]) | 0x30);  // compression 3
  EXPECT_FALSE(decode_tensor_spec(bytes).ok());
  bytes = encode(base());
  bytes[2] = std::byte(static_cast<uint8_t>(bytes[2]) | 0xc0);  // nan check 3
  EXPECT_FALSE(decode_tensor_spec(bytes).ok());
}

TEST(WireSpec, TensorsWithDifferentWireOptionsDoNotFuse) {
  std::vector<fusion_item> items;
  for (uint32_t i = 0; i < 4; ++i) {
    fusion_item it;
    it.id = i;
    it.bytes = 1024;
    it.wire_mode = i % 2;  // none, fp16, none, fp16
    items.push_back(it);
  }
  auto buckets = plan_buckets(items, 1u << 20);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].members.size(), 2u);
  EXPECT_EQ(buckets[0].members[1].id, 2u);
  EXPECT_EQ(buckets[1].wire_mode, 1);
}

}  // namespace
}  // namespace chorus
