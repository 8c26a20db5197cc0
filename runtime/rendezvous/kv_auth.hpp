// The rendezvous store's handshake: before any request, a client and rank 0's store prove to each
// other that they know the job secret, with the data plane's messages and MACs
// (runtime/wire/handshake.hpp) over the store's own stream number, so that no MAC from one kind
// of connection verifies on the other. Frames as in kv_protocol.hpp (u32 length | body):
//   1. client -> store  hello     {client rank, stream = store_stream, client nonce}
//   2. store -> client  challenge {0, store nonce, HMAC(secret, "server" | transcript)}
//   3. client checks that MAC    -> proof {HMAC(secret, "client" | transcript)}
//   4. store checks the proof (constant time) -> reply ok, or reply bad_request naming why and
//      closes. Nothing is read from or written to the store before step 4 succeeded.
// The two sides below are pure state machines; kv_client and kv_server do the I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/core/status.hpp"
#include "runtime/wire/handshake.hpp"

namespace chorus::kv {

/// Who may use the store: the job's secret (raw bytes, never empty: see job_secret_or_default)
/// and job id, bound into every MAC.
struct credentials {
  std::string secret;
  uint64_t job_id = 0;
};

/// The transcript's stream number on store connections (data-plane streams are far below it).
inline constexpr uint32_t store_stream = 0xFFFFFFFFu;
/// The largest handshake frame body either side accepts (a challenge is 68 bytes).
inline constexpr uint32_t max_handshake_bytes = 256;

/// A length-prefixed frame around a handshake message.
std::string handshake_frame(const std::vector<std::byte>& payload);

/// The client's side: hello(), then answer() the store's challenge with the proof to send.
class client_handshake {
 public:
  client_handshake(credentials creds, uint32_t rank);
  std::string hello() const;
  /// The proof frame, or errc::auth when the store's MAC is wrong (it does not know the secret,
  /// or is another job's) and errc::protocol when the challenge does not decode.
  result<std::string> answer(std::string_view challenge_body) const;

 private:
  credentials creds_;
  wire::transcript t_;
};

/// The store's side: on_hello() gives the challenge frame; check() verifies the proof.
class server_handshake {
 public:
  explicit server_handshake(credentials creds) : creds_(std::move(creds)) {}
  /// errc::protocol for a hello that does not decode or names another stream.
  result<std::string> on_hello(std::string_view body);
  /// ok, or errc::auth ("the client does not know the job secret") / errc::protocol.
  status check(std::string_view proof_body) const;
  /// The rank the client claimed in its hello (for messages).
  uint32_t client_rank() const { return t_.client_rank; }

 private:
  credentials creds_;
  wire::transcript t_;
};

}  // namespace chorus::kv
