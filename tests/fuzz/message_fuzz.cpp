// Fuzzes decode_message (runtime/negotiation/message.hpp): every control-plane frame between
// negotiators (gossip rounds, central reports, polls and answers) goes through it. A message
// that decodes must survive encode + decode unchanged and merge with itself (merge is
// idempotent: a join-semilattice).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/negotiation/message.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::negotiation;
  auto m = decode_message(std::span(reinterpret_cast<const std::byte*>(data), size));
  if (!m) return 0;
  auto again = decode_message(encode(*m));
  CHORUS_FUZZ_CHECK(again.ok(), "a decoded message does not decode after encoding");
  bool nan = std::isnan(m->score_min);  // NaN != NaN: compare the rest
  if (nan) m->score_min = again->score_min = 0;
  CHORUS_FUZZ_CHECK(*again == *m, "encode/decode round trip");
  if (!nan) {
    gossip_message merged = *m;
    merge(merged, *m);
    CHORUS_FUZZ_CHECK(merged == *m, "merge with itself changed the message");
  }
  return 0;
}
