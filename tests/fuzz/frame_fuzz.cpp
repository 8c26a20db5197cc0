// Fuzzes the data-plane frame header decoder (runtime/wire/frame.hpp), which reads the first
// 40 bytes of everything a peer sends on any connection. A header that decodes must encode
// back to the same 40 bytes, and describe() must cope with any decoded value.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/wire/frame.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::wire;
  const auto* in = reinterpret_cast<const std::byte*>(data);
  frame_limits limits;
  limits.job_id = 0x1234;  // the seeds' job id (make_seeds.cpp)
  auto h = decode(in, size, limits);
  if (!h) return 0;
  CHORUS_FUZZ_CHECK(size >= frame_header_size, "a header decoded from fewer than 40 bytes");
  CHORUS_FUZZ_CHECK(h->length <= limits.max_payload, "a length over the limit passed");
  CHORUS_FUZZ_CHECK(is_known_kind(static_cast<uint16_t>(h->kind)), "an unknown kind passed");
  std::byte again[frame_header_size];
  encode(*h, again);
  CHORUS_FUZZ_CHECK(std::memcmp(again, in, frame_header_size) == 0, "decode/encode round trip");
  (void)describe(*h);
  return 0;
}
