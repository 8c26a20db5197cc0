// The value of one hex digit, for the places that decode the job secret and ids from hex text
// (the ranks' environment and the launcher's elastic store).
#pragma once

namespace chorus {

/// 0-15 for '0'-'9', 'a'-'f' and 'A'-'F'; -1 for any other character.
constexpr int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace chorus
