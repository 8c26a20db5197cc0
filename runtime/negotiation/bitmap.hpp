// dynamic_bitmap: a growable set of small integers (tensor ids, ranks) with the AND/OR merges
// the gossip needs, and a compact codec. Bits past size() read as 0.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/byte_io.hpp"

namespace chorus {

class dynamic_bitmap {
 public:
  dynamic_bitmap() = default;
  /// `size` bits, all equal to `value`.
  explicit dynamic_bitmap(std::size_t size, bool value = false);

  std::size_t size() const { return size_; }
  /// Grows with zero bits or truncates.
  void resize(std::size_t size);
  /// Sets bit i, growing the bitmap to i+1 bits when needed.
  void set(std::size_t i, bool value = true);
  void reset(std::size_t i) { set(i, false); }
  /// False for i >= size().
  bool test(std::size_t i) const { return i < size_ && (words_[i / 64] >> (i % 64) & 1u); }
  std::size_t count() const;
  bool none() const;
  bool any() const { return !none(); }
  /// All bits to 0, size kept.
  void clear();

  /// this &= other. The result has max(size(), other.size()) bits; bits past other's size
  /// read as 0, so they end up 0.
  void and_with(const dynamic_bitmap& other);
  /// this |= other, growing to other's size.
  void or_with(const dynamic_bitmap& other);
  /// this &= ~other.
  void and_not(const dynamic_bitmap& other);

  /// Calls f(i) for each set bit, in increasing order.
  template <class F>
  void for_each_set(F&& f) const {
    for (std::size_t w = 0; w < words_.size(); ++w) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1) f(w * 64 + std::countr_zero(bits));
    }
  }
  /// The set bits in increasing order.
  std::vector<uint32_t> to_vector() const;

  /// Same size and same bits.
  bool operator==(const dynamic_bitmap& other) const = default;

 private:
  std::vector<uint64_t> words_;  // invariant: bits at and past size_ are 0
  std::size_t size_ = 0;
};

/// Largest bitmap the decoder accepts (bits), so a bad message cannot make us allocate GiBs.
inline constexpr std::size_t max_decoded_bitmap_bits = std::size_t{1} << 26;

/// varint size in bits, then ceil(size/8) bytes, least significant bit first.
void write(byte_writer& w, const dynamic_bitmap& b);
bool read(byte_reader& r, dynamic_bitmap& b);
std::vector<std::byte> encode(const dynamic_bitmap& b);
/// errc::protocol on truncation, bits set past the size, or trailing bytes.
result<dynamic_bitmap> decode_bitmap(std::span<const std::byte> in);

}  // namespace chorus
