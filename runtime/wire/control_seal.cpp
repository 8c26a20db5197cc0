// HMAC-SHA256 seals of control-plane messages (control_seal.hpp).
#include "runtime/wire/control_seal.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <stdexcept>

namespace chorus::wire {
namespace {

template <class T>
void put_le(uint8_t* out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i) & 0xff);
}

constexpr std::size_t sha256_block = 64;

/// A digest context for this thread's seals (reused: no allocation per seal).
EVP_MD_CTX* scratch() {
  struct holder {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~holder() { EVP_MD_CTX_free(ctx); }
  };
  thread_local holder h;
  return h.ctx;
}

}  // namespace

struct sealing_key::digest_state {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~digest_state() { EVP_MD_CTX_free(ctx); }
};

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

sealing_key::sealing_key(const mac& key) : inner_(new digest_state), outer_(new digest_state) {
  // RFC 2104 with a 32-byte key (shorter than the block): pad it with zeros to 64 bytes.
  uint8_t ipad[sha256_block], opad[sha256_block];
  for (std::size_t i = 0; i < sha256_block; ++i) {
    uint8_t k = i < key.size() ? key[i] : 0;
    ipad[i] = k ^ 0x36;
    opad[i] = k ^ 0x5c;
  }
  bool ok = inner_->ctx && outer_->ctx && EVP_DigestInit_ex(inner_->ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(inner_->ctx, ipad, sizeof ipad) == 1 &&
            EVP_DigestInit_ex(outer_->ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(outer_->ctx, opad, sizeof opad) == 1;
  OPENSSL_cleanse(ipad, sizeof ipad);
  OPENSSL_cleanse(opad, sizeof opad);
  if (!ok) {
    delete inner_;
    delete outer_;
    throw std::runtime_error("control seal: OpenSSL could not set up SHA-256");
  }
}

sealing_key::sealing_key(const sealing_key& other) : inner_(new digest_state), outer_(new digest_state) {
  if (!inner_->ctx || !outer_->ctx || EVP_MD_CTX_copy_ex(inner_->ctx, other.inner_->ctx) != 1 ||
      EVP_MD_CTX_copy_ex(outer_->ctx, other.outer_->ctx) != 1) {
    delete inner_;
    delete outer_;
    throw std::runtime_error("control seal: OpenSSL could not copy a digest state");
  }
}

sealing_key::~sealing_key() {
  delete inner_;
  delete outer_;
}

mac sealing_key::seal(const control_envelope& e, std::span<const uint8_t> payload) const {
  uint8_t head[4 + 4 + 8 + 1 + 4];
  put_le(head, e.from);
  put_le(head + 4, e.to);
  put_le(head + 8, e.counter);
  head[16] = e.kind;
  put_le(head + 17, static_cast<uint32_t>(e.origin));
  mac inner{}, out{};
  unsigned int len = 0;
  EVP_MD_CTX* c = scratch();
  bool ok = c && EVP_MD_CTX_copy_ex(c, inner_->ctx) == 1 && EVP_DigestUpdate(c, head, sizeof head) == 1 &&
            (payload.empty() || EVP_DigestUpdate(c, payload.data(), payload.size()) == 1) &&
            EVP_DigestFinal_ex(c, inner.data(), &len) == 1 && EVP_MD_CTX_copy_ex(c, outer_->ctx) == 1 &&
            EVP_DigestUpdate(c, inner.data(), inner.size()) == 1 && EVP_DigestFinal_ex(c, out.data(), &len) == 1;
  if (!ok) out.fill(0);
  return out;
}

bool sealing_key::matches(const control_envelope& e, std::span<const uint8_t> payload, const mac& tag) const {
  auto want = seal(e, payload);
  bool zero = true;
  for (auto b : want) zero = zero && b == 0;
  return !zero && mac_equal(want, tag);
}

}  // namespace chorus::wire
