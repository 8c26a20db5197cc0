// Control-plane seals: sealing_key computes exactly HMAC-SHA256 (checked against OpenSSL's
// one-shot HMAC over the same bytes), binds every envelope field, and separates jobs and
// secrets; copies seal alike; several threads may seal with one key at once.
#include "runtime/wire/control_seal.hpp"

#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <thread>
#include <vector>

namespace chorus::wire {
namespace {

mac reference_hmac(const mac& key, const control_envelope& e, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> msg;
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) msg.push_back(static_cast<uint8_t>(v >> (8 * i) & 0xff));
  };
  put(e.from, 4);
  put(e.to, 4);
  put(e.counter, 8);
  put(e.kind, 1);
  put(static_cast<uint32_t>(e.origin), 4);
  msg.insert(msg.end(), payload.begin(), payload.end());
  mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &len);
  return out;
}

TEST(sealing_key, is_hmac_sha256_of_the_envelope_and_payload) {
  auto key = control_key("secret", 7);
  sealing_key k(key);
  for (std::size_t n : {0u, 1u, 31u, 64u, 65u, 1000u}) {
    std::vector<uint8_t> payload(n);
    for (std::size_t i = 0; i < n; ++i) payload[i] = static_cast<uint8_t>(i * 37 + 11);
    control_envelope e{3, 5, 123456789012345ull, 2, -1};
    EXPECT_EQ(k.seal(e, payload), reference_hmac(key, e, payload)) << "payload of " << n << " bytes";
    EXPECT_TRUE(k.matches(e, payload, reference_hmac(key, e, payload)));
  }
}

TEST(sealing_key, every_field_and_the_key_change_the_seal) {
  auto key = control_key("secret", 7);
  sealing_key k(key);
  std::vector<uint8_t> p{1, 2, 3};
  control_envelope e{1, 0, 9, 1, 4};
  auto base = k.seal(e, p);
  std::vector<control_envelope> variants(5, e);
  variants[0].from = 2;
  variants[1].to = 1;
  variants[2].counter = 10;
  variants[3].kind = 3;
  variants[4].origin = -1;
  for (std::size_t i = 0; i < variants.size(); ++i) EXPECT_NE(k.seal(variants[i], p), base) << "field " << i;
  EXPECT_NE(k.seal(e, std::vector<uint8_t>{1, 2, 4}), base);
  EXPECT_NE(sealing_key(control_key("secret", 8)).seal(e, p), base) << "another job";
  EXPECT_NE(sealing_key(control_key("secret2", 7)).seal(e, p), base) << "another secret";
  EXPECT_FALSE(k.matches(variants[2], p, base));
  EXPECT_EQ(sealing_key(k).seal(e, p), base) << "a copy seals alike";
}

TEST(sealing_key, threads_seal_with_one_key_at_once) {
  auto key = control_key("secret", 7);
  sealing_key k(key);
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 2000; ++i) {
        control_envelope e{static_cast<uint32_t>(t), 0, i, 1, -1};
        std::vector<uint8_t> p{static_cast<uint8_t>(i), static_cast<uint8_t>(t)};
        if (k.seal(e, p) != reference_hmac(key, e, p)) ++wrong[static_cast<std::size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace chorus::wire
