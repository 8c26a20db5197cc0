// Reduce-scatter slices and chunk windows (see scatter_plan.hpp).
#include "runtime/collectives/scatter_plan.hpp"

#include <algorithm>

#include "runtime/collectives/ring_schedule.hpp"

namespace chorus {

std::vector<byte_range> split_rows(std::size_t rows, std::size_t row_bytes, int parts) {
  std::vector<byte_range> out(static_cast<std::size_t>(parts));
  for (int r = 0; r < parts; ++r) {
    std::size_t lo = block_begin(rows, parts, r), hi = block_begin(rows, parts, r + 1);
    out[static_cast<std::size_t>(r)] = {lo * row_bytes, (hi - lo) * row_bytes};
  }
  return out;
}

std::vector<byte_range> slices_of(const std::vector<std::size_t>& counts, std::size_t element_bytes) {
  std::vector<byte_range> out;
  out.reserve(counts.size());
  std::size_t at = 0;
  for (auto c : counts) {
    out.push_back({at, c * element_bytes});
    at += c * element_bytes;
  }
  return out;
}

std::vector<scatter_window> scatter_windows(const std::vector<byte_range>& slices, std::size_t element_bytes,
                                            std::size_t chunk_bytes, int parts) {
  std::size_t longest = 0;
  for (const auto& s : slices) longest = std::max(longest, s.length);
  if (longest == 0 || chunk_bytes == 0) return {{0, longest}};
  std::size_t e = std::max<std::size_t>(1, element_bytes);
  std::size_t cut = chunk_bytes / static_cast<std::size_t>(std::max(1, parts)) / e * e;
  if (cut == 0) cut = e;
  std::vector<scatter_window> out;
  for (std::size_t off = 0; off < longest; off += cut) out.push_back({off, std::min(cut, longest - off)});
  return out;
}

std::vector<byte_range> window_of(const std::vector<byte_range>& slices, const scatter_window& w) {
  std::vector<byte_range> out;
  out.reserve(slices.size());
  for (const auto& s : slices) {
    std::size_t lo = std::min(w.offset, s.length), hi = std::min(w.offset + w.bytes, s.length);
    out.push_back({s.offset + lo, hi - lo});
  }
  return out;
}

}  // namespace chorus
