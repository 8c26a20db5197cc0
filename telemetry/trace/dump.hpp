// `chorus-trace dump FILE...`: one JSON object per record and line, in file order, with the
// file, the rank, the byte offset and the time (µs since the file was opened). Control
// messages are decoded (kind, cycle, round, sender, ready ids, announced names).
#pragma once

#include <ostream>

#include "telemetry/trace/reader.hpp"

namespace chorus::telemetry::trace {

/// One record as a JSON object (no newline).
std::string to_json(const trace_file& f, const trace_record& r);

/// Writes every record of `f` to `out`, one per line.
void dump(const trace_file& f, std::ostream& out);

}  // namespace chorus::telemetry::trace
