// What an operation asks of the wire: compression (CHORUS_COMPRESSION) and the NaN/Inf check
// (CHORUS_NAN_CHECK), as job defaults and per operation. Part of every tensor's spec, so ranks
// that ask differently get a mismatch error naming the tensor instead of garbage.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "chorus/types.hpp"  // compression, nan_check

namespace chorus {

/// "none", "fp16", "bf16".
std::string_view name_of(compression c);
std::optional<compression> parse_compression(std::string_view s);
/// "off", "error", "skip".
std::string_view name_of(nan_check c);
std::optional<nan_check> parse_nan_check(std::string_view s);

/// CHORUS_COMPRESSION_SHM: automatic drops compression among ranks that all share memory; on
/// keeps it there too.
enum class shm_compression : uint8_t { automatic = 0, on = 1 };
/// "auto", "on".
std::string_view name_of(shm_compression m);
std::optional<shm_compression> parse_shm_compression(std::string_view s);

}  // namespace chorus
