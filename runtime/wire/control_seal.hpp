// Sealing control-plane messages with the job secret. The data plane authenticates each
// connection once (handshake.hpp); the control plane runs over CAF's I/O layer, which lets any
// process that reaches a published port send messages, so every message between negotiators
// carries a MAC instead:
//   key  = HMAC(secret, "chorus-control-key-v1" | job id)        (derived once per process)
//   seal = HMAC(key, from | to | counter | kind | origin | payload)     (sealing_key)
// `counter` grows by one per (from, to) pair, so a receiver refuses a replayed or reordered
// message; `to` binds the message to its receiver. HMAC-SHA256 from OpenSSL.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "runtime/wire/handshake.hpp"

namespace chorus::wire {

/// What a seal covers besides the payload.
struct control_envelope {
  uint32_t from = 0;      ///< sending rank
  uint32_t to = 0;        ///< receiving rank
  uint64_t counter = 0;   ///< 1, 2, ... per (from, to)
  uint8_t kind = 0;       ///< what the payload is (actors/protocol.hpp: control_kind)
  int32_t origin = -1;    ///< a rank the message is about (e.g. the one that was lost), or -1
};

/// The key control messages of job `job_id` are sealed with (secret: as in handshake.hpp).
mac control_key(const std::string& secret, uint64_t job_id);

/// HMAC-SHA256 under one key, with the key's inner and outer pads hashed once (RFC 2104): a
/// seal then costs two SHA-256 runs over the message, without the MAC setup that OpenSSL 3's
/// one-shot HMAC() repeats per call (the first sealed control plane, which used it and sent
/// an actor handle in every message, added 30-60 µs per negotiation cycle; this one adds
/// none that 8 paired runs could see). seal and matches may run on several threads at once.
class sealing_key {
 public:
  explicit sealing_key(const mac& key);
  ~sealing_key();
  sealing_key(const sealing_key& other);
  sealing_key& operator=(const sealing_key&) = delete;

  /// The seal of one message (all zero if OpenSSL failed, which no receiver accepts).
  mac seal(const control_envelope& e, std::span<const uint8_t> payload) const;
  /// Constant-time check of `tag` against the seal of (e, payload).
  bool matches(const control_envelope& e, std::span<const uint8_t> payload, const mac& tag) const;

 private:
  struct digest_state;
  digest_state* inner_;  ///< SHA-256 after (key ^ ipad)
  digest_state* outer_;  ///< SHA-256 after (key ^ opad)
};

}  // namespace chorus::wire
