// How a reduce-scatter divides a tensor among the ranks and how it is cut into chunks, as pure
// functions. Every rank computes the same slices and windows from the same (agreed) shape, so
// the chunks of a reduce-scatter match across ranks without any exchange.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/collectives/ring_op.hpp"

namespace chorus {

/// Horovod's split of dim 0: `rows` rows of `row_bytes` bytes among `parts` ranks, as
/// contiguous byte ranges in rank order; rank r gets rows / parts rows, plus one when
/// r < rows % parts.
std::vector<byte_range> split_rows(std::size_t rows, std::size_t row_bytes, int parts);

/// Contiguous slices of counts[r] elements of `element_bytes` each, in rank order.
std::vector<byte_range> slices_of(const std::vector<std::size_t>& counts, std::size_t element_bytes);

/// One chunk of a reduce-scatter covers the same window [offset, offset + bytes) of every
/// rank's slice (clipped to each slice; a slice may contribute nothing).
struct scatter_window {
  std::size_t offset = 0;
  std::size_t bytes = 0;
  friend bool operator==(const scatter_window&, const scatter_window&) = default;
};

/// Cuts the slices into windows of chunk_bytes / parts bytes (rounded down to whole elements,
/// at least one element), ascending; together they cover the longest slice. Zero-byte slices
/// everywhere give one empty window, so the operation still runs (and completes) once.
/// `chunk_bytes == 0` means one window.
std::vector<scatter_window> scatter_windows(const std::vector<byte_range>& slices, std::size_t element_bytes,
                                            std::size_t chunk_bytes, int parts);

/// The part of every slice that window `w` covers (lengths may be 0).
std::vector<byte_range> window_of(const std::vector<byte_range>& slices, const scatter_window& w);

}  // namespace chorus
