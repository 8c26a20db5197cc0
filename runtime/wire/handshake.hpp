// The connection handshake: both sides prove knowledge of the job secret without sending it.
//   1. client -> server  hello     {client rank, stream, client nonce}
//   2. server -> client  challenge {server rank, server nonce, HMAC(secret, "server" | transcript)}
//   3. client checks the server's MAC, then -> proof {HMAC(secret, "client" | transcript)}
//   4. server checks the client's MAC (constant time) -> accept, or reject with a reason.
// The transcript binds job id, both ranks, the stream and both nonces, so no MAC can be replayed
// on another connection. HMAC-SHA256 from OpenSSL.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus::wire {

using nonce = std::array<uint8_t, 32>;
using mac = std::array<uint8_t, 32>;

struct hello_msg {
  uint32_t client_rank = 0;
  uint32_t stream = 0;
  nonce client_nonce{};
};

struct challenge_msg {
  uint32_t server_rank = 0;
  nonce server_nonce{};
  mac server_mac{};
};

struct proof_msg {
  mac client_mac{};
};

/// What both MACs are computed over.
struct transcript {
  uint64_t job_id = 0;
  uint32_t client_rank = 0;
  uint32_t server_rank = 0;
  uint32_t stream = 0;
  nonce client_nonce{};
  nonce server_nonce{};
};

/// The HMAC key that `secret` stands for (the secret hashed with its length, so that secrets
/// HMAC would pad alike, such as "k" and "k\0", stay distinct).
mac derive_key(const std::string& secret);
nonce random_nonce();
mac server_mac(const std::string& secret, const transcript& t);
mac client_mac(const std::string& secret, const transcript& t);
/// The id one attempt of a job proves in every handshake and frame: derived from the secret, the
/// job id and a nonce rank 0 draws at each rendezvous (never 0). A restarted job (same secret
/// and job id) gets another one, so a rank left over from the last attempt cannot join it.
uint64_t session_id(const std::string& secret, uint64_t job_id, const nonce& fresh);
/// Constant-time comparison.
bool mac_equal(const mac& a, const mac& b);

std::vector<std::byte> encode(const hello_msg& m);
std::vector<std::byte> encode(const challenge_msg& m);
std::vector<std::byte> encode(const proof_msg& m);
result<hello_msg> decode_hello(const std::vector<std::byte>& payload);
result<challenge_msg> decode_challenge(const std::vector<std::byte>& payload);
result<proof_msg> decode_proof(const std::vector<std::byte>& payload);

}  // namespace chorus::wire
