// The data-plane frame header codec (runtime/wire/frame.hpp): the byte layout, round trips of
// random headers (seed printed, CHORUS_TEST_SEED overrides), and one case per reason decode()
// refuses a header, each checking that the message names the reason and the values.
#include "runtime/wire/frame.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>

namespace chorus::wire {
namespace {

using bytes = std::array<std::byte, frame_header_size>;

uint64_t test_seed() {
  const char* s = std::getenv("CHORUS_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20240611;
}

frame_header sample() {
  frame_header h;
  h.kind = frame_kind::data;
  h.job_id = 0x1122334455667788;
  h.sequence = 42;
  h.step = 7;
  h.length = 1000;
  h.offset = 4096;
  return h;
}

bytes encoded(const frame_header& h) {
  bytes b;
  encode(h, b.data());
  return b;
}

void put_le(bytes& b, std::size_t at, uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) b[at + i] = static_cast<std::byte>(v >> (8 * i) & 0xff);
}

TEST(frame, layout_is_little_endian_at_fixed_offsets) {
  auto b = encoded(sample());
  bytes want{};
  put_le(want, 0, frame_magic, 4);
  put_le(want, 4, protocol_version, 2);
  put_le(want, 6, 1, 2);
  put_le(want, 8, 0x1122334455667788, 8);
  put_le(want, 16, 42, 8);
  put_le(want, 24, 7, 4);
  put_le(want, 28, 1000, 4);
  put_le(want, 32, 4096, 8);
  EXPECT_EQ(b, want);
  EXPECT_EQ(static_cast<char>(b[0]), 'C');  // "CHRS" reads as text in a hex dump
  EXPECT_EQ(static_cast<char>(b[3]), 'S');
}

TEST(frame, round_trip_of_random_headers_and_extremes) {
  const uint64_t seed = test_seed();
  std::printf("seed=%llu (CHORUS_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const frame_kind kinds[] = {frame_kind::data,  frame_kind::goodbye, frame_kind::control, frame_kind::hello,
                              frame_kind::challenge, frame_kind::proof, frame_kind::accept, frame_kind::reject};
  for (int i = 0; i < 2000; ++i) {
    frame_header h;
    h.kind = kinds[rng() % std::size(kinds)];
    h.job_id = rng();
    h.sequence = i == 0 ? ~uint64_t{0} : rng();
    h.step = i == 0 ? ~uint32_t{0} : static_cast<uint32_t>(rng());
    h.offset = i == 0 ? ~uint64_t{0} : rng();
    frame_limits limits{h.job_id, ~uint32_t{0}};
    h.length = i == 0 ? limits.max_payload : static_cast<uint32_t>(rng());
    auto b = encoded(h);
    auto d = decode(b.data(), b.size(), limits);
    ASSERT_TRUE(d.ok()) << "seed=" << seed << " i=" << i << ": " << d.error().to_string();
    EXPECT_EQ(d->kind, h.kind);
    EXPECT_EQ(d->job_id, h.job_id);
    EXPECT_EQ(d->sequence, h.sequence);
    EXPECT_EQ(d->step, h.step);
    EXPECT_EQ(d->length, h.length);
    EXPECT_EQ(d->offset, h.offset);
  }
}

TEST(frame, decode_ignores_bytes_past_the_header) {
  std::array<std::byte, frame_header_size + 8> buf{};
  encode(sample(), buf.data());
  auto d = decode(buf.data(), buf.size(), frame_limits{sample().job_id});
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_EQ(d->sequence, 42u);
}

TEST(frame, length_equal_to_the_limit_is_accepted) {
  auto h = sample();
  h.length = 1000;
  auto b = encoded(h);
  EXPECT_TRUE(decode(b.data(), b.size(), frame_limits{h.job_id, 1000}).ok());
}

// Every length short of a header is refused, naming how much there was.
class truncated_frame : public ::testing::TestWithParam<std::size_t> {};

TEST_P(truncated_frame, is_refused_with_the_length_seen) {
  auto b = encoded(sample());
  auto d = decode(b.data(), GetParam(), frame_limits{sample().job_id});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), errc::protocol);
  EXPECT_EQ(d.error().message(), "truncated frame header: " + std::to_string(GetParam()) + " of 40 bytes");
}

INSTANTIATE_TEST_SUITE_P(every_short_length, truncated_frame, ::testing::Range<std::size_t>(0, frame_header_size));

// A well-formed header, then one change that decode must refuse.
struct bad_header {
  std::string name;
  std::function<void(bytes&, frame_limits&)> spoil;
  std::string expected;  // exact message
};

void PrintTo(const bad_header& c, std::ostream* os) { *os << c.name; }

class refused_frame : public ::testing::TestWithParam<bad_header> {};

TEST_P(refused_frame, names_the_reason_and_the_values) {
  auto b = encoded(sample());
  frame_limits limits{sample().job_id, 1 << 20};
  GetParam().spoil(b, limits);
  auto d = decode(b.data(), b.size(), limits);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), errc::protocol);
  EXPECT_EQ(d.error().message(), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    each_reason, refused_frame,
    ::testing::Values(
        bad_header{"wrong_magic", [](bytes& b, frame_limits&) { put_le(b, 0, 0x50545448, 4); },
                   "wrong magic 0x50545448, expected 0x53524843"},
        bad_header{"byte_swapped_magic", [](bytes& b, frame_limits&) { put_le(b, 0, 0x43485253, 4); },
                   "wrong magic 0x43485253, expected 0x53524843"},
        bad_header{"version_0", [](bytes& b, frame_limits&) { put_le(b, 4, 0, 2); },
                   "protocol version 0, expected 1"},
        bad_header{"version_2", [](bytes& b, frame_limits&) { put_le(b, 4, 2, 2); },
                   "protocol version 2, expected 1"},
        bad_header{"kind_0", [](bytes& b, frame_limits&) { put_le(b, 6, 0, 2); }, "unknown frame kind 0"},
        bad_header{"kind_8", [](bytes& b, frame_limits&) { put_le(b, 6, 8, 2); }, "unknown frame kind 8"},
        bad_header{"kind_15", [](bytes& b, frame_limits&) { put_le(b, 6, 15, 2); }, "unknown frame kind 15"},
        bad_header{"kind_21", [](bytes& b, frame_limits&) { put_le(b, 6, 21, 2); }, "unknown frame kind 21"},
        bad_header{"kind_65535", [](bytes& b, frame_limits&) { put_le(b, 6, 65535, 2); },
                   "unknown frame kind 65535"},
        bad_header{"length_over_limit", [](bytes& b, frame_limits&) { put_le(b, 28, (1 << 20) + 1, 4); },
                   "payload length 1048577 over the limit 1048576"},
        bad_header{"length_max", [](bytes& b, frame_limits&) { put_le(b, 28, 0xffffffff, 4); },
                   "payload length 4294967295 over the limit 1048576"},
        bad_header{"wrong_job", [](bytes&, frame_limits& l) { l.job_id = 0xabc; },
                   "frame of job 0x1122334455667788, expected job 0xabc"},
        bad_header{"job_zero", [](bytes& b, frame_limits&) { put_le(b, 8, 0, 8); },
                   "frame of job 0x0, expected job 0x1122334455667788"}),
    [](const auto& info) { return info.param.name; });

TEST(frame, is_known_kind_matches_the_enum) {
  int known = 0;
  for (uint32_t k = 0; k <= 0xffff; ++k) known += is_known_kind(static_cast<uint16_t>(k));
  EXPECT_EQ(known, 12);
  for (auto k : {1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20}) EXPECT_TRUE(is_known_kind(static_cast<uint16_t>(k))) << k;
}

TEST(frame, describe_names_the_routing_fields) {
  EXPECT_EQ(describe(sample()), "kind=1 seq=42 step=7 offset=4096 length=1000");
}

}  // namespace
}  // namespace chorus::wire
