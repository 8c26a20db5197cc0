// What an operation asks of the wire: compression (CHORUS_COMPRESSION) and the NaN/Inf check
// (CHORUS_NAN_CHECK), as job defaults and per operation. Part of every tensor's spec, so ranks
// that ask differently get a mismatch error naming the tensor instead of garbage.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace chorus {

/// What a collective puts on the wire for f32/f64 data.
enum class compression : uint8_t { none = 0, fp16 = 1, bf16 = 2 };
inline constexpr int compression_count = 3;

/// off: no check; error: an operation whose input holds NaN/Inf on any rank fails on every
/// rank, naming the tensor and those ranks; skip: it completes and every rank learns the same
/// list of such ranks (handle::nonfinite_ranks), so that all skip the step together.
enum class nan_check : uint8_t { off = 0, error = 1, skip = 2 };
inline constexpr int nan_check_count = 3;

/// "none", "fp16", "bf16".
std::string_view name_of(compression c);
std::optional<compression> parse_compression(std::string_view s);
/// "off", "error", "skip".
std::string_view name_of(nan_check c);
std::optional<nan_check> parse_nan_check(std::string_view s);

}  // namespace chorus
