// Varint, string and double encodings shared by the negotiation codecs.
#include "runtime/negotiation/byte_io.hpp"

#include <bit>
#include <cstring>

namespace chorus {

void byte_writer::varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<std::byte>(v));
}

void byte_writer::f64(double v) {
  auto bits = std::bit_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(bits >> (8 * i)));
}

void byte_writer::str(std::string_view s) {
  varint(s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out_.insert(out_.end(), p, p + s.size());
}

bool byte_reader::fail(const char* what, const std::string& why) {
  if (error_.ok()) {
    error_ = status{errc::protocol, std::string("negotiation codec: ") + why + " at byte " +
                                        std::to_string(pos_) + " reading " + what};
  }
  return false;
}

bool byte_reader::u8(uint8_t& v, const char* what) {
  if (!ok()) return false;
  if (remaining() < 1) return fail(what, "truncated");
  v = static_cast<uint8_t>(in_[pos_++]);
  return true;
}

bool byte_reader::varint(uint64_t& v, const char* what) {
  if (!ok()) return false;
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (remaining() < 1) return fail(what, "truncated");
    auto b = static_cast<uint8_t>(in_[pos_++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return fail(what, "varint longer than 10 bytes");
}

bool byte_reader::svarint(int64_t& v, const char* what) {
  uint64_t u = 0;
  if (!varint(u, what)) return false;
  v = static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
  return true;
}

bool byte_reader::f64(double& v, const char* what) {
  if (!ok()) return false;
  if (remaining() < 8) return fail(what, "truncated");
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(in_[pos_++]) << (8 * i);
  v = std::bit_cast<double>(bits);
  return true;
}

bool byte_reader::str(std::string& s, const char* what, std::size_t max_len) {
  uint64_t n = 0;
  if (!varint(n, what)) return false;
  if (n > max_len) return fail(what, "length " + std::to_string(n) + " over the limit " + std::to_string(max_len));
  if (n > remaining()) return fail(what, "truncated");
  s.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
  pos_ += n;
  return true;
}

bool byte_reader::charge(std::size_t bytes, const char* what) {
  if (!ok()) return false;
  if (bytes > budget_ - charged_)
    return fail(what, "decoding would take more than " + std::to_string(budget_) + " bytes of memory for a " +
                          std::to_string(in_.size()) + "-byte message");
  charged_ += bytes;
  return true;
}

bool byte_reader::count(std::size_t& n, const char* what) {
  uint64_t v = 0;
  if (!varint(v, what)) return false;
  if (v > remaining()) {
    return fail(what, "truncated: count " + std::to_string(v) + " but " + std::to_string(remaining()) + " bytes left");
  }
  n = static_cast<std::size_t>(v);
  return true;
}

}  // namespace chorus
