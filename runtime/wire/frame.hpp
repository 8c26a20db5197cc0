// The data-plane frame: a fixed 40-byte header, then `length` payload bytes.
// Every field is little-endian. A receiver routes a frame by (sequence, step, offset) to
// whoever handles that chunk, whichever connection carried it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/core/status.hpp"

namespace chorus::wire {

inline constexpr uint32_t frame_magic = 0x53524843;  // "CHRS"
inline constexpr uint16_t protocol_version = 1;
inline constexpr std::size_t frame_header_size = 40;

/// What a frame carries.
enum class frame_kind : uint16_t {
  data = 1,       ///< a segment of one collective step: payload lands at `offset` of the chunk
  goodbye = 2,    ///< the sender is shutting down cleanly; no more frames follow
  abort = 3,      ///< the sender found the job broken; payload is the reason; it closes next
  control = 4,    ///< control link only (transport/tcp/control_link.hpp): kind u8 | origin i32 | bytes
  /// the doorbell of a stream's shared-memory ring (transport/shm/ring.hpp): frames wait in
  /// the ring while its reader slept; no payload
  shm_wake = 5,
  heartbeat = 6,  ///< control link only: "this rank's runtime is alive"; no payload
  shm_pad = 7,    ///< inside a shared-memory ring only: the rest of the ring is skipped; no payload
  hello = 16,     ///< handshake 1: client's rank, stream and nonce
  challenge = 17, ///< handshake 2: server's nonce and proof of the secret
  proof = 18,     ///< handshake 3: client's proof of the secret
  accept = 19,    ///< handshake 4: server accepts the connection
  reject = 20,    ///< handshake: refused, payload is the reason
};

/// Layout: magic u32 | version u16 | kind u16 | job_id u64 | sequence u64 | step u32 |
///         length u32 | offset u64
struct frame_header {
  frame_kind kind = frame_kind::data;
  uint64_t job_id = 0;
  uint64_t sequence = 0;  ///< global chunk sequence number, identical on every rank
  uint32_t step = 0;      ///< step of the chunk's collective schedule
  uint32_t length = 0;    ///< payload bytes
  uint64_t offset = 0;    ///< byte offset of the payload inside the chunk's buffer
};

/// What a receiver accepts; anything else closes the connection.
struct frame_limits {
  uint64_t job_id = 0;
  uint32_t max_payload = 64u << 20;
};

void encode(const frame_header& h, std::byte* out);

/// Validates and decodes a header. Errors (errc::protocol) say what was wrong:
/// truncated, wrong magic, wrong version, unknown kind, length over the limit, wrong job.
result<frame_header> decode(const std::byte* in, std::size_t available, const frame_limits& limits);

bool is_known_kind(uint16_t kind);
std::string describe(const frame_header& h);

}  // namespace chorus::wire
