// HMAC computation and message codecs of the connection handshake.
#include "runtime/wire/handshake.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <random>

namespace chorus::wire {
namespace {

void put32(std::vector<std::byte>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i) & 0xff));
}

uint32_t get32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

template <std::size_t N>
void put_bytes(std::vector<std::byte>& out, const std::array<uint8_t, N>& a) {
  for (auto b : a) out.push_back(static_cast<std::byte>(b));
}

template <std::size_t N>
void get_bytes(const std::byte* p, std::array<uint8_t, N>& a) {
  std::memcpy(a.data(), p, N);
}

// A message's fields in order: each u32 as 4 little-endian bytes, each nonce or MAC as is.
void put_field(std::vector<std::byte>& out, uint32_t v) { put32(out, v); }
template <std::size_t N>
void put_field(std::vector<std::byte>& out, const std::array<uint8_t, N>& a) {
  put_bytes(out, a);
}
template <class... F>
void put_fields(std::vector<std::byte>& out, const F&... f) {
  (put_field(out, f), ...);
}

void get_field(const std::byte*& p, uint32_t& v) {
  v = get32(p);
  p += 4;
}
template <std::size_t N>
void get_field(const std::byte*& p, std::array<uint8_t, N>& a) {
  get_bytes(p, a);
  p += N;
}
template <class... F>
void get_fields(const std::byte* p, F&... f) {
  (get_field(p, f), ...);
}

mac compute(const std::string& secret, const char* label, const transcript& t) {
  auto key = derive_key(secret);
  std::vector<std::byte> msg;
  for (const char* c = label; *c; ++c) msg.push_back(static_cast<std::byte>(*c));
  for (int i = 0; i < 8; ++i) msg.push_back(static_cast<std::byte>(t.job_id >> (8 * i) & 0xff));
  put_fields(msg, t.client_rank, t.server_rank, t.stream, t.client_nonce, t.server_nonce);
  mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out.data(), &len);
  return out;
}

status wrong_size(const char* what, std::size_t got, std::size_t want) {
  return status{errc::protocol, std::string(what) + " payload of " + std::to_string(got) +
                                    " bytes, expected " + std::to_string(want)};
}

}  // namespace

// HMAC pads short keys with zero bytes, so "k" and "k\0" would be the same key. Secrets are
// first hashed together with their length, which keeps every distinct secret distinct.
mac derive_key(const std::string& secret) {
  std::vector<uint8_t> in;
  const char* tag = "chorus-job-secret-v1";
  in.insert(in.end(), tag, tag + std::strlen(tag));
  uint64_t n = secret.size();
  for (int i = 0; i < 8; ++i) in.push_back(static_cast<uint8_t>(n >> (8 * i) & 0xff));
  in.insert(in.end(), secret.begin(), secret.end());
  std::array<uint8_t, 32> key{};
  unsigned int len = 0;
  EVP_Digest(in.data(), in.size(), key.data(), &len, EVP_sha256(), nullptr);
  return key;
}

nonce random_nonce() {
  nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    std::random_device rd;  // OpenSSL's generator failed: fall back to the OS source
    for (auto& b : n) b = static_cast<uint8_t>(rd());
  }
  return n;
}

mac server_mac(const std::string& secret, const transcript& t) { return compute(secret, "chorus-server-v1", t); }
mac client_mac(const std::string& secret, const transcript& t) { return compute(secret, "chorus-client-v1", t); }

uint64_t session_id(const std::string& secret, uint64_t job_id, const nonce& fresh) {
  auto m = compute(secret, "chorus-session-v1", transcript{job_id, 0, 0, 0, fresh, fresh});
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id = id << 8 | m[static_cast<std::size_t>(i)];
  return id ? id : 1;
}

bool mac_equal(const mac& a, const mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

std::vector<std::byte> encode(const hello_msg& m) {
  std::vector<std::byte> out;
  put_fields(out, m.client_rank, m.stream, m.client_nonce);
  return out;
}

std::vector<std::byte> encode(const challenge_msg& m) {
  std::vector<std::byte> out;
  put_fields(out, m.server_rank, m.server_nonce, m.server_mac);
  return out;
}

std::vector<std::byte> encode(const proof_msg& m) {
  std::vector<std::byte> out;
  put_fields(out, m.client_mac);
  return out;
}

result<hello_msg> decode_hello(const std::vector<std::byte>& p) {
  if (p.size() != 40) return wrong_size("hello", p.size(), 40);
  hello_msg m;
  get_fields(p.data(), m.client_rank, m.stream, m.client_nonce);
  return m;
}

result<challenge_msg> decode_challenge(const std::vector<std::byte>& p) {
  if (p.size() != 68) return wrong_size("challenge", p.size(), 68);
  challenge_msg m;
  get_fields(p.data(), m.server_rank, m.server_nonce, m.server_mac);
  return m;
}

result<proof_msg> decode_proof(const std::vector<std::byte>& p) {
  if (p.size() != 32) return wrong_size("proof", p.size(), 32);
  proof_msg m;
  get_fields(p.data(), m.client_mac);
  return m;
}

}  // namespace chorus::wire
