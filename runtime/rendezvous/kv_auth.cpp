// The store handshake's two sides (kv_auth.hpp): framing and the MAC checks.
#include "runtime/rendezvous/kv_auth.hpp"

#include <vector>

namespace chorus::kv {
namespace {

std::vector<std::byte> bytes_of(std::string_view body) {
  std::vector<std::byte> out(body.size());
  for (size_t i = 0; i < body.size(); ++i) out[i] = static_cast<std::byte>(body[i]);
  return out;
}

}  // namespace

std::string handshake_frame(const std::vector<std::byte>& payload) {
  std::string out;
  const auto n = static_cast<uint32_t>(payload.size());
  out.reserve(4 + payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(n >> shift));
  for (auto b : payload) out.push_back(static_cast<char>(b));
  return out;
}

client_handshake::client_handshake(credentials creds, uint32_t rank) : creds_(std::move(creds)) {
  t_.job_id = creds_.job_id;
  t_.client_rank = rank;
  t_.server_rank = 0;
  t_.stream = store_stream;
  t_.client_nonce = wire::random_nonce();
}

std::string client_handshake::hello() const {
  return handshake_frame(wire::encode(wire::hello_msg{t_.client_rank, store_stream, t_.client_nonce}));
}

result<std::string> client_handshake::answer(std::string_view challenge_body) const {
  auto c = wire::decode_challenge(bytes_of(challenge_body));
  if (!c) return status{errc::protocol, "the store's challenge: " + c.error().message()};
  wire::transcript t = t_;
  t.server_nonce = c->server_nonce;
  if (c->server_rank != 0 || !wire::mac_equal(c->server_mac, wire::server_mac(creds_.secret, t)))
    return status{errc::auth, "the store did not prove the job secret: it belongs to another job, or "
                              "CHORUS_JOB_SECRET differs between this rank and rank 0"};
  return handshake_frame(wire::encode(wire::proof_msg{wire::client_mac(creds_.secret, t)}));
}

result<std::string> server_handshake::on_hello(std::string_view body) {
  auto h = wire::decode_hello(bytes_of(body));
  if (!h) return status{errc::protocol, "hello: " + h.error().message()};
  if (h->stream != store_stream)
    return status{errc::protocol, "hello names stream " + std::to_string(h->stream) +
                                      ", not the store's: a data-plane connection, not a store client"};
  t_.job_id = creds_.job_id;
  t_.client_rank = h->client_rank;
  t_.server_rank = 0;
  t_.stream = store_stream;
  t_.client_nonce = h->client_nonce;
  t_.server_nonce = wire::random_nonce();
  return handshake_frame(wire::encode(wire::challenge_msg{0, t_.server_nonce, wire::server_mac(creds_.secret, t_)}));
}

status server_handshake::check(std::string_view proof_body) const {
  auto p = wire::decode_proof(bytes_of(proof_body));
  if (!p) return status{errc::protocol, "proof: " + p.error().message()};
  if (!wire::mac_equal(p->client_mac, wire::client_mac(creds_.secret, t_)))
    return status{errc::auth, "the client (rank " + std::to_string(t_.client_rank) +
                                  " by its word) does not know the job secret"};
  return {};
}

}  // namespace chorus::kv
