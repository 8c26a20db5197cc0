// `chorus-trace stragglers DIR`: which rank held each tensor and each cycle back. For every
// operation (the k-th op on a name is matched across ranks) the last rank to make it ready,
// and by how long it trailed the rank before it (how long the others waited for it alone);
// for every cycle the same over its agreed tensors; then a summary, slowest ranks first.
// Times are on the ranks' common wall clock (see timeline.hpp).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "telemetry/trace/reader.hpp"

namespace chorus::telemetry::trace {

struct straggler_entry {
  std::string name;      ///< tensor name ("" for a cycle)
  uint64_t cycle = 0;    ///< the cycle that agreed it
  int last_rank = -1;
  int64_t by_ns = 0;     ///< last rank's ready time minus the latest of the other ranks'
};

struct rank_summary {
  int rank = 0;
  uint64_t tensors_last = 0;  ///< ops on which this rank was last
  uint64_t cycles_last = 0;
  int64_t total_ns = 0;       ///< sum of by_ns over the ops it was last on
  int64_t max_ns = 0;
  std::string max_name;
  uint64_t max_cycle = 0;
};

struct straggler_report {
  int ranks = 0;
  std::vector<straggler_entry> tensors;  ///< in agreed order
  std::vector<straggler_entry> cycles;   ///< in cycle order
  std::vector<rank_summary> summary;     ///< slowest first (total_ns, then tensors_last)
};

straggler_report find_stragglers(const std::vector<trace_file>& ranks);
void print(const straggler_report& r, std::ostream& out);

}  // namespace chorus::telemetry::trace
