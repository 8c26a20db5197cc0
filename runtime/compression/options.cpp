// Names of the wire options, as CHORUS_COMPRESSION and CHORUS_NAN_CHECK spell them.
#include "runtime/compression/options.hpp"

namespace chorus {

std::string_view name_of(compression c) {
  switch (c) {
    case compression::none: return "none";
    case compression::fp16: return "fp16";
    case compression::bf16: return "bf16";
  }
  return "unknown";
}

std::optional<compression> parse_compression(std::string_view s) {
  for (int i = 0; i < compression_count; ++i)
    if (name_of(compression(i)) == s) return compression(i);
  return std::nullopt;
}

std::string_view name_of(nan_check c) {
  switch (c) {
    case nan_check::off: return "off";
    case nan_check::error: return "error";
    case nan_check::skip: return "skip";
  }
  return "unknown";
}

std::optional<nan_check> parse_nan_check(std::string_view s) {
  for (int i = 0; i < nan_check_count; ++i)
    if (name_of(nan_check(i)) == s) return nan_check(i);
  return std::nullopt;
}

std::string_view name_of(shm_compression m) { return m == shm_compression::on ? "on" : "auto"; }

std::optional<shm_compression> parse_shm_compression(std::string_view s) {
  if (s == "auto") return shm_compression::automatic;
  if (s == "on") return shm_compression::on;
  return std::nullopt;
}

}  // namespace chorus
