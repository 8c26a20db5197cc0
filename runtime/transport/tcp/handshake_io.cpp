// Client and server halves of the connection handshake over blocking sockets.
#include "runtime/transport/tcp/handshake_io.hpp"

#include "runtime/wire/handshake.hpp"

namespace chorus::tcp {
namespace {

using wire::frame_header;
using wire::frame_kind;

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
  return out;
}

std::string text_of(const std::vector<std::byte>& b) {
  std::string out(b.size(), '\0');
  for (std::size_t i = 0; i < b.size(); ++i) out[i] = static_cast<char>(b[i]);
  return out;
}

frame_header header(frame_kind k, uint64_t job) {
  frame_header h;
  h.kind = k;
  h.job_id = job;
  return h;
}

// Tells the other side why, best effort, and returns the status to the caller.
status refuse(int fd, uint64_t job, errc code, const std::string& reason, clock::time_point deadline) {
  send_frame(fd, header(frame_kind::reject, job), bytes_of(reason), deadline);
  return status{code, reason};
}

// The server's next frame, which must be of kind `want` (`wanted`: how the error names it); a
// reject carries the server's reason.
result<frame> expect_frame(int fd, const wire::frame_limits& limits, clock::time_point deadline, frame_kind want,
                           const char* wanted, int server_rank) {
  auto f = recv_frame(fd, limits, deadline);
  if (!f) return f.error();
  if (f->header.kind == frame_kind::reject)
    return status{errc::auth, "refused by rank " + std::to_string(server_rank) + ": " + text_of(f->payload)};
  if (f->header.kind != want)
    return status{errc::protocol, std::string("expected ") + wanted + ", got frame kind " +
                                      std::to_string(static_cast<int>(f->header.kind))};
  return f;
}

}  // namespace

status client_handshake(int fd, const handshake_config& cfg, int stream, int server_rank,
                        clock::time_point deadline) {
  wire::frame_limits limits{cfg.job_id, 4096};
  wire::hello_msg hello{static_cast<uint32_t>(cfg.rank), static_cast<uint32_t>(stream), wire::random_nonce()};
  auto st = send_frame(fd, header(frame_kind::hello, cfg.job_id), wire::encode(hello), deadline);
  if (!st.ok()) return st;

  auto f = expect_frame(fd, limits, deadline, frame_kind::challenge, "a challenge", server_rank);
  if (!f) return f.error();
  auto ch = wire::decode_challenge(f->payload);
  if (!ch) return ch.error();
  wire::transcript t{cfg.job_id, hello.client_rank, ch->server_rank, hello.stream, hello.client_nonce,
                     ch->server_nonce};
  if (!wire::mac_equal(ch->server_mac, wire::server_mac(cfg.secret, t)))
    return refuse(fd, cfg.job_id, errc::auth, "server failed to prove the job secret (wrong CHORUS_JOB_SECRET?)",
                  deadline);
  if (static_cast<int>(ch->server_rank) != server_rank)
    return refuse(fd, cfg.job_id, errc::protocol,
                  "expected rank " + std::to_string(server_rank) + " but rank " +
                      std::to_string(ch->server_rank) + " answered",
                  deadline);
  st = send_frame(fd, header(frame_kind::proof, cfg.job_id), wire::encode(wire::proof_msg{wire::client_mac(cfg.secret, t)}),
                  deadline);
  if (!st.ok()) return st;

  auto verdict = expect_frame(fd, limits, deadline, frame_kind::accept, "accept", server_rank);
  if (!verdict) return verdict.error();
  return {};
}

result<client_identity> server_handshake(int fd, const handshake_config& cfg, clock::time_point deadline,
                                         const std::function<status(const client_identity&)>& admit) {
  wire::frame_limits limits{cfg.job_id, 4096};
  auto f = recv_frame(fd, limits, deadline);
  if (!f) return f.error();
  if (f->header.kind != frame_kind::hello)
    return refuse(fd, cfg.job_id, errc::protocol, "expected hello", deadline);
  auto hello = wire::decode_hello(f->payload);
  if (!hello) return refuse(fd, cfg.job_id, errc::protocol, hello.error().message(), deadline);

  wire::challenge_msg ch{static_cast<uint32_t>(cfg.rank), wire::random_nonce(), {}};
  wire::transcript t{cfg.job_id, hello->client_rank, ch.server_rank, hello->stream, hello->client_nonce,
                     ch.server_nonce};
  ch.server_mac = wire::server_mac(cfg.secret, t);
  auto st = send_frame(fd, header(frame_kind::challenge, cfg.job_id), wire::encode(ch), deadline);
  if (!st.ok()) return st;

  auto p = recv_frame(fd, limits, deadline);
  if (!p) return p.error();
  if (p->header.kind == frame_kind::reject)
    return status{errc::auth, "client gave up: " + text_of(p->payload)};
  if (p->header.kind != frame_kind::proof)
    return refuse(fd, cfg.job_id, errc::protocol, "expected proof", deadline);
  auto proof = wire::decode_proof(p->payload);
  if (!proof) return refuse(fd, cfg.job_id, errc::protocol, proof.error().message(), deadline);
  if (!wire::mac_equal(proof->client_mac, wire::client_mac(cfg.secret, t)))
    return refuse(fd, cfg.job_id, errc::auth, "wrong job secret", deadline);

  client_identity who{static_cast<int>(hello->client_rank), static_cast<int>(hello->stream)};
  st = admit(who);
  if (!st.ok()) return refuse(fd, cfg.job_id, st.code(), st.message(), deadline);
  st = send_frame(fd, header(frame_kind::accept, cfg.job_id), {}, deadline);
  if (!st.ok()) return st;
  return who;
}

}  // namespace chorus::tcp
