// Fuzzes the compact binary tensor_spec decoder (runtime/negotiation/tensor_spec.hpp): the
// specs ranks announce to each other. A spec that decodes must round-trip, and the helpers
// that print it in error messages must cope with any decoded value.
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/negotiation/tensor_spec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  auto s = decode_tensor_spec(std::span(reinterpret_cast<const std::byte*>(data), size));
  if (!s) return 0;
  auto again = decode_tensor_spec(encode(*s));
  CHORUS_FUZZ_CHECK(again.ok() && *again == *s, "encode/decode round trip");
  (void)describe(*s);
  (void)format_shape(s->shape);
  (void)validate(*s, 4);
  (void)s->num_elements();
  (void)s->byte_size();
  return 0;
}
