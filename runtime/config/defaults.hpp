// Defaults that more than one module starts from, written once: the variables' table gives the
// same values to users (runtime/config/variables.cpp).
#pragma once

#include <cstddef>

namespace chorus {

/// CHORUS_CHUNK_BYTES: the unit of work per stream.
inline constexpr std::size_t default_chunk_bytes = 4u << 20;
/// CHORUS_FUSION_THRESHOLD (HOROVOD_FUSION_THRESHOLD): the largest fused bucket.
inline constexpr std::size_t default_fusion_threshold = 64u << 20;

}  // namespace chorus
