// Fuzzes the rendezvous store's codecs (runtime/rendezvous/kv_protocol.hpp) and its handshake
// (kv_auth.hpp): the server reads a hello and a proof from anyone who connects, then requests;
// every rank reads the store's challenge and replies. The first input byte picks which; the
// rest is a frame body. What decodes must round-trip; a random proof never verifies.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/rendezvous/kv_auth.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

std::string_view body_of(const std::string& frame) { return std::string_view(frame).substr(chorus::kv::header_bytes); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::kv;
  if (size < 1) return 0;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (size >= 1 + header_bytes) {
    unsigned char header[header_bytes];
    for (size_t i = 0; i < header_bytes; ++i) header[i] = data[1 + i];
    (void)decode_length(header);
  }
  if (data[0] % 4 == 2) {  // the store's side of the handshake: the body as hello, then as proof
    server_handshake hs(credentials{"fuzz secret", 7});
    if (hs.on_hello(body).ok()) CHORUS_FUZZ_CHECK(hs.check(body).code() != chorus::errc::ok, "a fuzzed proof verified");
    return 0;
  }
  if (data[0] % 4 == 3) {  // a rank reading a challenge
    client_handshake hs(credentials{"fuzz secret", 7}, 1);
    CHORUS_FUZZ_CHECK(!hs.answer(body).ok(), "a fuzzed challenge verified");
    return 0;
  }
  if (data[0] % 2 == 0) {
    auto r = decode_request(body);
    if (!r) return 0;
    auto again = decode_request(body_of(encode_frame(*r)));
    CHORUS_FUZZ_CHECK(again.ok(), "an encoded request does not decode");
    CHORUS_FUZZ_CHECK(again->kind == r->kind && again->key == r->key && again->value == r->value &&
                          again->count == r->count && again->wait_ms == r->wait_ms,
                      "request round trip");
  } else {
    auto r = decode_reply(body);
    if (!r) return 0;
    auto again = decode_reply(body_of(encode_frame(*r)));
    CHORUS_FUZZ_CHECK(again.ok(), "an encoded reply does not decode");
    CHORUS_FUZZ_CHECK(again->code == r->code && again->message == r->message && again->values == r->values &&
                          again->missing == r->missing,
                      "reply round trip");
  }
  return 0;
}
