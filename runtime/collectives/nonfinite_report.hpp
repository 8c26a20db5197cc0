// The NaN/Inf check's verdict on one operation: which ranks' inputs held NaN or +-Inf, one bit
// per rank, the same on every rank once the operation ends. The checked ring agrees on it with
// a flag ring (wire_ring_op.hpp); the shared-memory mailboxes see every rank's input and fill
// it without one (mailbox_allreduce.hpp). Several chunks of one operation OR into one report,
// from whichever threads run them: locked.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace chorus {

class nonfinite_report {
 public:
  /// ORs `bits` (bit r of word r / 64: rank r) into the report.
  void merge(const std::vector<uint64_t>& bits);
  /// The ranks, ascending (empty: every input was finite).
  std::vector<int> ranks() const;
  bool any() const;

 private:
  mutable std::mutex mu_;
  std::vector<uint64_t> bits_;
};

}  // namespace chorus
