// `chorus-trace timeline DIR -o out.json`: the traces of every rank merged into one Chrome /
// Perfetto trace (JSON object format, "traceEvents"). One process per rank; its threads are
// "negotiation" (cycles as spans, agreed batches, stalls and errors as instants), "fusion"
// (each bucket as a span from its first chunk's start to its last chunk's end), "ops" (each
// operation as an async span from enqueue to callback) and one "stream S" per data-plane
// stream (chunks as spans, steals as instants). Times are µs on the ranks' common wall clock
// (each file's header lines its steady clock up with the system clock).
#pragma once

#include <ostream>
#include <vector>

#include "telemetry/trace/reader.hpp"

namespace chorus::telemetry::trace {

struct timeline_stats {
  std::size_t events = 0;
};

/// Writes the merged timeline of `ranks` to `out`.
timeline_stats write_timeline(const std::vector<trace_file>& ranks, std::ostream& out);

}  // namespace chorus::telemetry::trace
