// Copies between callers' tensors and a bucket's fused buffer, following the offsets that
// plan_buckets() chose. One memcpy per member; the alignment gaps between members are
// zeroed on pack (so a reduction over the whole buffer never meets stale NaNs there) and
// skipped on unpack. In-place buckets need neither, but both work on them too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "runtime/core/status.hpp"
#include "runtime/fusion/fusion_plan.hpp"

namespace chorus {

/// The caller's input buffer of tensor `id`, or nullptr when it has none.
using pack_source = std::function<const void*(uint32_t id)>;
/// The caller's output buffer of tensor `id`, or nullptr when it has none.
using unpack_destination = std::function<void*(uint32_t id)>;

/// Copies every member into `dst` at its offset and zeroes the gaps between members.
/// Errors: errc::invalid_argument when `dst` is smaller than the bucket; errc::internal,
/// naming the id, when a member with bytes has no source. Nothing is copied on error.
status pack(const bucket& b, const pack_source& sources, std::span<std::byte> dst);

/// Copies every member from `src` at its offset into its destination. A destination that
/// is the very bytes of `src` (an in-place bucket unpacked onto itself) is skipped.
/// Errors as for pack(); nothing is copied on error.
status unpack(const bucket& b, std::span<const std::byte> src, const unpack_destination& destinations);

}  // namespace chorus
