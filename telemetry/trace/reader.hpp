// Reads a trace file (format.hpp) into records. The only parser of the format: dump, timeline,
// stragglers and replay all read through it. Damage (a truncated file, a block whose checksum
// fails, a record that does not parse) ends the records at the last good one and is reported
// as an error naming the file and the byte offset: nothing after the damage is trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"
#include "telemetry/observer.hpp"
#include "telemetry/trace/format.hpp"

namespace chorus::telemetry::trace {

/// Decoding bound. Records name tensors by the id of an interned string, and each decoded record
/// holds its own copy (tensor_spec owns its name), so the bytes copied out of the string table
/// may add up to at most this floor plus this many per byte of file; past that the file is
/// damaged at the record that crosses it. Real files stay far below: a name is copied once per
/// record that uses it, and such a record takes at least a few bytes.
inline constexpr uint64_t decoded_string_floor = uint64_t{256} << 20;
inline constexpr uint64_t decoded_string_per_file_byte = 64;

struct trace_header {
  uint16_t version = 0;
  int rank = 0;
  int size = 0;
  int64_t steady_ns = 0;  ///< steady clock when the file was opened
  int64_t wall_ns = 0;    ///< system clock at the same moment
};

/// One record, decoded. Which fields hold values depends on `kind` (see format.hpp); names
/// are resolved, times are steady-clock nanoseconds relative to trace_header::steady_ns.
struct trace_record {
  record_kind kind = record_kind::end;
  uint64_t offset = 0;             ///< byte offset of the record in the file
  int64_t t_ns = 0;
  uint64_t handle = 0;             ///< enqueue, callback, ready
  uint64_t cycle = 0;              ///< ready, cycle, agreed, bucket
  uint64_t sequence = 0;           ///< chunk_start, chunk_end, steal, call; bucket: first sequence
  uint64_t bytes = 0;              ///< chunks, bucket; compressed: the caller's bytes; direct_path: max
  uint64_t bucket = 0;
  uint64_t count = 0;              ///< bucket: chunks; cycle: messages sent; lost; limit; end;
                                   ///< compressed: wire bytes
  uint64_t count2 = 0;             ///< cycle: messages received
  int peer = -1;                   ///< gossip_sent: to; chunks, compressed: stream; steal: thief
  int victim = -1;                 ///< steal
  int64_t started_ns = 0;          ///< callback: enqueued; chunk_end, cycle, call: started
  tensor_spec spec;                ///< enqueue, callback, ready
  status result;                   ///< callback, chunk_end, error, call
  std::vector<std::string> names;  ///< agreed, bucket: tensors; stall: the name
  std::vector<int64_t> values;     ///< agreed: latency µs per name; stall: missing ranks
  std::string text;                ///< bucket: collective kind; error: its kind; call: torch's name
  std::string group;               ///< call: the group's name
  std::string algorithm;           ///< bucket: bucket_event::algorithm (empty in older traces)
  bool in_place = false;           ///< bucket
  std::vector<uint8_t> payload;    ///< gossip_sent, gossip_received: the encoded message
  tunables tuning;                 ///< tunables; autotune: the tunables after the window
  autotune_event autotune;         ///< autotune (its in_force is `tuning`)
};

struct trace_file {
  std::string path;
  trace_header header;
  std::vector<trace_record> records;  ///< in file order; no `string` records
  /// Not ok: the file is damaged at the offset it names; `records` stop before the damage.
  status damage;
  bool ended = false;    ///< the recorder closed the file cleanly (an `end` record)
  bool limited = false;  ///< recording stopped at CHORUS_TRACE_MAX_MB
  uint64_t lost = 0;     ///< records the recorder dropped (a full buffer)

  /// Wall-clock nanoseconds of a record time: lines the ranks up on one timeline.
  int64_t wall_ns(int64_t t_ns) const { return header.wall_ns + t_ns; }
};

/// Reads the whole file. An error when it cannot be opened or its header is not a supported
/// trace header; later damage goes to trace_file::damage.
result<trace_file> read_trace(const std::string& path);

/// read_trace on bytes already in memory (`path` only names them in errors): the parser itself,
/// which the fuzz target tests/fuzz/trace_reader_fuzz.cpp drives.
result<trace_file> parse_trace(const std::string& path, std::span<const std::byte> data);

/// read_trace, with damage turned into the error.
result<trace_file> read_trace_strict(const std::string& path);

/// The traces of a directory: <prefix><r>.trace for r = 0..size-1 ("rank-": the actor pipeline's;
/// "c10d-rank-": torch.distributed groups'), each checked strictly. An error names a missing
/// rank, a size that differs between files, or the first damage.
result<std::vector<trace_file>> read_trace_dir(const std::string& dir, const std::string& prefix = "rank-");

}  // namespace chorus::telemetry::trace
