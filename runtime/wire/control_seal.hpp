// Sealing control-plane messages with the job secret. The data plane authenticates each
// connection once (handshake.hpp); the control plane runs over CAF's I/O layer, which lets any
// process that reaches a published port send messages, so every message between negotiators
// carries a MAC instead:
//   key  = HMAC(secret, "chorus-control-key-v1" | job id)        (derived once per process)
//   seal = HMAC(key, from | to | counter | kind | origin | payload)
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
/// The seal of one message.
mac seal(const mac& key, const control_envelope& e, std::span<const uint8_t> payload);
/// Constant-time check of `tag` against the seal of (e, payload).
bool seal_matches(const mac& key, const control_envelope& e, std::span<const uint8_t> payload, const mac& tag);

}  // namespace chorus::wire
