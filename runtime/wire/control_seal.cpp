// HMAC-SHA256 seals of control-plane messages (control_seal.hpp).
#include "runtime/wire/control_seal.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <vector>

namespace chorus::wire {
namespace {

template <class T>
void put_le(uint8_t* out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i) & 0xff);
}

}  // namespace

mac control_key(const std::string& secret, uint64_t job_id) {
  auto base = derive_key(secret);
  const char* label = "chorus-control-key-v1";
  uint8_t msg[64];
  std::size_t n = std::strlen(label);
  std::memcpy(msg, label, n);
  put_le(msg + n, job_id);
  mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), base.data(), static_cast<int>(base.size()), msg, n + 8, out.data(), &len);
  return out;
}

mac seal(const mac& key, const control_envelope& e, std::span<const uint8_t> payload) {
  uint8_t head[4 + 4 + 8 + 1 + 4];
  put_le(head, e.from);
  put_le(head + 4, e.to);
  put_le(head + 8, e.counter);
  head[16] = e.kind;
  put_le(head + 17, static_cast<uint32_t>(e.origin));
  std::vector<uint8_t> msg(sizeof head + payload.size());
  std::memcpy(msg.data(), head, sizeof head);
  if (!payload.empty()) std::memcpy(msg.data() + sizeof head, payload.data(), payload.size());
  mac out{};
  unsigned int len = 0;
  // A failed HMAC (out of memory) yields a seal no receiver accepts, never a guessable one.
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &len))
    out.fill(0);
  return out;
}

bool seal_matches(const mac& key, const control_envelope& e, std::span<const uint8_t> payload, const mac& tag) {
  auto want = seal(key, e, payload);
  bool zero = true;
  for (auto b : want) zero = zero && b == 0;
  return !zero && mac_equal(want, tag);
}

}  // namespace chorus::wire
