// One value as a whole buffer, for types with write()/read() over byte_io (bitmaps, specs):
// the encoding alone, and a decode that refuses trailing bytes.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/byte_io.hpp"

namespace chorus {

template <class T>
std::vector<std::byte> encode_value(const T& v) {
  std::vector<std::byte> out;
  byte_writer w(out);
  write(w, v);
  return out;
}

/// `what` names the value in the error for trailing bytes ("bitmap", "tensor spec").
template <class T>
result<T> decode_value(std::span<const std::byte> in, const char* what) {
  byte_reader r(in);
  T v;
  if (!read(r, v)) return r.error();
  if (r.remaining() != 0) {
    r.fail(what, std::to_string(r.remaining()) + " trailing bytes");
    return r.error();
  }
  return v;
}

}  // namespace chorus
