// hier_readiness: per-phase counts of outstanding receives over byte ranges, as step functions.
#include "runtime/collectives/hier_readiness.hpp"

#include <cstdint>
#include <iterator>

namespace chorus {

hier_readiness::hier_readiness(const std::vector<hier_step>& steps) {
  for (const auto& s : steps)
    if (s.recv.peer >= 0 && s.recv.length > 0) add(s.phase, s.recv.offset, s.recv.offset + s.recv.length, 1);
}

bool hier_readiness::add(int p, std::size_t lo, std::size_t hi, int delta) {
  if (p < 0 || p >= phases) return false;
  if (lo >= hi) return true;
  auto& m = left_[p];
  // Split at lo and hi so that [lo, hi) is made of whole pieces.
  auto value_at = [&m](std::size_t x) {
    auto it = m.upper_bound(x);
    return it == m.begin() ? 0 : std::prev(it)->second;
  };
  m.emplace(hi, value_at(hi));
  m.emplace(lo, value_at(lo));
  for (auto it = m.find(lo); it->first < hi; ++it)
    if (it->second + delta < 0) return false;  // (the split alone changes no count)
  for (auto it = m.find(lo); it->first < hi; ++it) it->second += delta;
  // Merge equal neighbours from the piece before lo through hi, so the map stays as small as the
  // ranges; a leading zero piece says nothing (absent means zero).
  auto prev = m.find(lo);
  if (prev != m.begin()) --prev;
  const auto stop = m.find(hi);
  for (auto cur = std::next(prev); cur != m.end();) {
    const bool last = cur == stop;
    if (cur->second == prev->second) cur = m.erase(cur);
    else prev = cur++;
    if (last) break;
  }
  if (!m.empty() && m.begin()->second == 0) m.erase(m.begin());
  return true;
}

bool hier_readiness::ready(int phase, std::size_t offset, std::size_t length) const {
  const std::size_t hi = offset + length;
  for (int p = 0; p < phase && p < phases; ++p) {
    const auto& m = left_[p];
    auto it = m.upper_bound(offset);
    if (it != m.begin()) --it;  // the piece holding `offset`
    for (; it != m.end() && it->first < hi; ++it) {
      auto next = std::next(it);
      const std::size_t end = next == m.end() ? SIZE_MAX : next->first;
      if (it->second > 0 && end > offset) return false;
    }
  }
  return true;
}

bool hier_readiness::received(int phase, std::size_t offset, std::size_t length) {
  return add(phase, offset, offset + length, -1);
}

}  // namespace chorus
