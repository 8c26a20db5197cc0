// One bit per rank, ORed under a lock (nonfinite_report.hpp).
#include "runtime/collectives/nonfinite_report.hpp"

#include <algorithm>

namespace chorus {

void nonfinite_report::merge(const std::vector<uint64_t>& bits) {
  std::lock_guard lk(mu_);
  if (bits_.size() < bits.size()) bits_.resize(bits.size(), 0);
  for (std::size_t i = 0; i < bits.size(); ++i) bits_[i] |= bits[i];
}

std::vector<int> nonfinite_report::ranks() const {
  std::lock_guard lk(mu_);
  std::vector<int> out;
  for (std::size_t w = 0; w < bits_.size(); ++w)
    for (int b = 0; b < 64; ++b)
      if (bits_[w] >> b & 1u) out.push_back(static_cast<int>(w * 64 + b));
  return out;
}

bool nonfinite_report::any() const {
  std::lock_guard lk(mu_);
  return std::any_of(bits_.begin(), bits_.end(), [](uint64_t w) { return w != 0; });
}

}  // namespace chorus
