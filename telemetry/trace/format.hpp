// The trace file format: what `<dir>/rank-<r>.trace` holds, declared in one place. The
// recorder (recorder.hpp) writes it; the reader (reader.hpp) is the only code that parses it.
//
// Layout (integers little-endian; varint = LEB128, svarint = zigzag LEB128):
//   header  "CHTRACE\0" (8 bytes) | u16 version | u16 header_bytes | i32 rank | i32 size |
//           u64 steady_ns | u64 wall_ns                                 (36 bytes in version 1)
//           steady_ns and wall_ns are the steady and system clocks read at the same moment:
//           record times are steady-clock nanoseconds relative to steady_ns, and wall_ns lines
//           the ranks up on one timeline.
//   blocks  u32 body_bytes | u32 crc32 (of body) | body; the writer thread writes one block per
//           flush, so damage is found at the block it hits and nothing after it is trusted.
//   body    records, each: varint record_bytes | u8 kind | svarint t_ns | payload
//           (record_bytes counts kind, t_ns and payload).
// Strings (tensor names, collective kinds, error kinds) are interned: a `string` record
// defines an id before any record uses it; specs are written as below with the name's id.
// A reader skips nothing: an unknown kind is corruption in version 1.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace chorus::telemetry::trace {

inline constexpr std::array<char, 8> file_magic{'C', 'H', 'T', 'R', 'A', 'C', 'E', '\0'};
inline constexpr uint16_t format_version = 1;
inline constexpr uint16_t header_bytes = 36;
inline constexpr std::size_t block_header_bytes = 8;
/// A block body larger than this is corruption (the writer never writes one).
inline constexpr uint32_t max_block_bytes = 64u << 20;

/// The kind byte of a record, and its payload. `spec` = u8 collective | u8 dtype | u8 op |
/// u8 device (bit 5: a priority follows) | svarint root | varint process_set | varint name id |
/// varint ndim | svarint dims [| svarint priority].
/// `status` = u8 errc | (if not ok) string message. `bytes` = varint length | raw bytes.
enum class record_kind : uint8_t {
  string = 1,           ///< varint id | string text                      (interning)
  tunables = 2,         ///< varint fusion_threshold | varint chunk_bytes | svarint streams |
                        ///< varint cycle_time_us | varint in_place_bytes
  enqueue = 3,          ///< varint handle | spec
  callback = 4,         ///< varint handle | spec | status | svarint enqueued_ns
  ready = 5,            ///< varint handle | spec | varint cycle
  gossip_sent = 6,      ///< svarint to | bytes (an encoded negotiation::gossip_message)
  gossip_received = 7,  ///< bytes
  cycle = 8,            ///< varint cycle | varint messages_sent | varint messages_received |
                        ///< svarint started_ns (t_ns is when it finished)
  agreed = 9,           ///< varint cycle | varint n | n × (varint name id | varint latency_us)
  stall = 10,           ///< varint name id | varint n | n × svarint missing rank
  bucket = 11,          ///< varint bucket | varint cycle | varint first_sequence | varint chunks |
                        ///< varint bytes | u8 in_place | varint kind id | varint n | n × name id |
                        ///< varint algorithm id (bucket_event::algorithm; absent in older traces)
  chunk_start = 12,     ///< svarint stream | varint sequence | varint bytes
  chunk_end = 13,       ///< svarint stream | varint sequence | varint bytes | status | svarint started_ns
  steal = 14,           ///< svarint thief | svarint victim | varint sequence
  error = 15,           ///< varint kind id | status
  lost = 16,            ///< varint records dropped because a thread's buffer was full
  limit = 17,           ///< varint max_bytes: CHORUS_TRACE_MAX_MB reached, nothing after this
  end = 18,             ///< varint records written: the recorder closed the file cleanly
  autotune = 19,        ///< varint cycle | varint window | f64 score | u8 flags (1 sample, 2 switched) |
                        ///< varint sample index | f64 sample score | tunables (as above) | varint digest
  compressed = 20,      ///< svarint stream | varint raw_bytes | varint wire_bytes: a compressed chunk
                        ///< ended (raw: the caller's bytes; wire: fp16/bf16 bytes, what the ring moved)
  direct_path = 21,     ///< varint max_bytes: the pipeline's direct path takes chunks up to this many
                        ///< bytes (observer::on_direct_path; absent: none, as in older traces)
  call = 22,            ///< varint group id | varint seq | varint call id | varint bytes | status |
                        ///< svarint started_ns: a torch.distributed group's call ended at t_ns
                        ///< (observer::on_call; files c10d-rank-<r>.trace)
};

/// A spec's device byte: a priority other than 0 follows the dims (absent in older traces).
inline constexpr uint8_t spec_priority_bit = 0x20;

/// "enqueue", "ready", ...; "unknown" for a value outside the enum.
std::string_view name_of(record_kind k);

/// CRC-32 (IEEE 802.3, the zlib polynomial) of `data`.
uint32_t crc32(std::span<const std::byte> data);

/// Little-endian fixed-width helpers for the header and block framing.
void put_u16(std::byte* at, uint16_t v);
void put_u32(std::byte* at, uint32_t v);
void put_u64(std::byte* at, uint64_t v);
uint16_t get_u16(const std::byte* at);
uint32_t get_u32(const std::byte* at);
uint64_t get_u64(const std::byte* at);

}  // namespace chorus::telemetry::trace
