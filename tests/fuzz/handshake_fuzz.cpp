// Fuzzes the handshake message decoders (runtime/wire/handshake.hpp): the payloads of hello,
// challenge and proof frames, the first bytes an unauthenticated peer gets to send. The first
// input byte picks the message; whatever decodes must encode back to the same payload.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/wire/handshake.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::wire;
  if (size < 1) return 0;
  const auto* p = reinterpret_cast<const std::byte*>(data + 1);
  std::vector<std::byte> payload(p, p + (size - 1));
  switch (data[0] % 3) {
    case 0:
      if (auto m = decode_hello(payload)) CHORUS_FUZZ_CHECK(encode(*m) == payload, "hello round trip");
      break;
    case 1:
      if (auto m = decode_challenge(payload)) CHORUS_FUZZ_CHECK(encode(*m) == payload, "challenge round trip");
      break;
    default:
      if (auto m = decode_proof(payload)) CHORUS_FUZZ_CHECK(encode(*m) == payload, "proof round trip");
      break;
  }
  return 0;
}
