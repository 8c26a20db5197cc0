// Little helpers for the compact negotiation codecs: LEB128 varints, zigzag signed varints,
// strings and doubles appended to a byte vector, and a reader that remembers the first
// failure (what it was reading and at which byte) instead of throwing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/status.hpp"

namespace chorus {

/// Appends encoded values to a byte vector it does not own.
class byte_writer {
 public:
  explicit byte_writer(std::vector<std::byte>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void varint(uint64_t v);
  void svarint(int64_t v) { varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void f64(double v);
  void str(std::string_view s);

 private:
  std::vector<std::byte>& out_;
};

/// Reads encoded values from a span. After the first failure every read fails and error()
/// says what was being read, at which byte offset, and why ("truncated", "too large").
class byte_reader {
 public:
  explicit byte_reader(std::span<const std::byte> in) : in_(in) {}
  bool u8(uint8_t& v, const char* what);
  bool varint(uint64_t& v, const char* what);
  bool svarint(int64_t& v, const char* what);
  bool f64(double& v, const char* what);
  /// Strings longer than max_len are rejected before any allocation.
  bool str(std::string& s, const char* what, std::size_t max_len = 1u << 16);
  /// A count of items that each take at least one byte: rejects counts larger than the bytes left.
  bool count(std::size_t& n, const char* what);
  /// Charges `bytes` of decoded memory against the reader's budget (see set_budget): a small
  /// message must not be able to ask for gigabytes through counts of cheap items.
  bool charge(std::size_t bytes, const char* what);
  /// The most decoded memory this reader's input may produce: by default 16 x its size + 64 KiB
  /// (a real gossip message decodes to about 4-8 x), at most 256 MiB.
  void set_budget(std::size_t bytes) { budget_ = bytes; }
  /// Records a failure found by the caller (unknown enum value, bad size, ...).
  bool fail(const char* what, const std::string& why);

  bool ok() const { return error_.ok(); }
  const status& error() const { return error_; }
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return in_.size() - pos_; }

 private:
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  std::size_t budget_ = std::min<std::size_t>(in_.size() * 16 + (64u << 10), std::size_t{256} << 20);
  std::size_t charged_ = 0;
  status error_;
};

}  // namespace chorus
