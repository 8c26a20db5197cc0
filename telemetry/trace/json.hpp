// A small JSON writer for the trace tools: strings escaped per RFC 8259, numbers printed so
// that every reader parses them (no NaN/Inf).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace chorus::telemetry::trace::json {

/// `s` as a JSON string literal, quotes included.
std::string quote(std::string_view s);
/// A finite number; NaN and infinities become null.
std::string number(double v);

}  // namespace chorus::telemetry::trace::json
