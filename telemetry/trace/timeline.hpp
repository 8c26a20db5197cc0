// `chorus-trace timeline DIR -o out.json`: the traces of every rank merged into one Chrome /
// Perfetto trace (JSON object format, "traceEvents"). One process per rank; its threads are
// "negotiation" (cycles as spans, agreed batches, stalls and errors as instants), "fusion"
// (each bucket as a span from its first chunk's start to its last chunk's end), "ops" (each
// operation as an async span from enqueue to callback, named by its tensor, holding its phases
// as Horovod's timeline shows them: NEGOTIATE_<KIND> from enqueue to the agreed batch, QUEUE
// until its bucket's first chunk starts, then <KIND> until the callback) and one "stream S"
// per data-plane stream (chunks as spans, steals as instants). Times are µs on the ranks'
// common wall clock (each file's header lines its steady clock up with the system clock).
// An operation whose enqueue is not in the file (recording started later) is left out.
#pragma once

#include <ostream>
#include <vector>

#include "telemetry/trace/reader.hpp"

namespace chorus::telemetry::trace {

struct timeline_options {
  /// Adds a global instant event "CYCLE_START" at the start of every negotiation cycle
  /// (Horovod's mark_cycles).
  bool mark_cycles = false;
};

struct timeline_stats {
  std::size_t events = 0;
};

/// Writes the merged timeline of `ranks` to `out`.
timeline_stats write_timeline(const std::vector<trace_file>& ranks, std::ostream& out,
                              const timeline_options& options = {});

}  // namespace chorus::telemetry::trace
