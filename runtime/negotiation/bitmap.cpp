// The growable bitmap over tensor ids and ranks, and its codec.
#include "runtime/negotiation/bitmap.hpp"

#include <algorithm>

#include "runtime/negotiation/value_codec.hpp"

namespace chorus {

dynamic_bitmap::dynamic_bitmap(std::size_t size, bool value)
    : words_((size + 63) / 64, value ? ~uint64_t{0} : 0), size_(size) {
  if (value && size % 64 != 0) words_.back() &= (uint64_t{1} << (size % 64)) - 1;
}

void dynamic_bitmap::resize(std::size_t size) {
  words_.resize((size + 63) / 64, 0);
  size_ = size;
  if (size % 64 != 0) words_.back() &= (uint64_t{1} << (size % 64)) - 1;
}

void dynamic_bitmap::set(std::size_t i, bool value) {
  if (i >= size_) {
    if (!value) return;
    resize(i + 1);
  }
  if (value) {
    words_[i / 64] |= uint64_t{1} << (i % 64);
  } else {
    words_[i / 64] &= ~(uint64_t{1} << (i % 64));
  }
}

std::size_t dynamic_bitmap::count() const {
  std::size_t n = 0;
  for (auto w : words_) n += static_cast<std::size_t>(std::popcount(w));
  return n;
}

bool dynamic_bitmap::none() const {
  return std::all_of(words_.begin(), words_.end(), [](uint64_t w) { return w == 0; });
}

void dynamic_bitmap::clear() { std::fill(words_.begin(), words_.end(), 0); }

void dynamic_bitmap::and_with(const dynamic_bitmap& other) {
  if (other.size_ > size_) resize(other.size_);
  for (std::size_t w = 0; w < words_.size(); ++w) words_[w] &= w < other.words_.size() ? other.words_[w] : 0;
}

void dynamic_bitmap::or_with(const dynamic_bitmap& other) {
  if (other.size_ > size_) resize(other.size_);
  for (std::size_t w = 0; w < other.words_.size(); ++w) words_[w] |= other.words_[w];
}

void dynamic_bitmap::and_not(const dynamic_bitmap& other) {
  for (std::size_t w = 0; w < words_.size() && w < other.words_.size(); ++w) words_[w] &= ~other.words_[w];
}

std::vector<uint32_t> dynamic_bitmap::to_vector() const {
  std::vector<uint32_t> out;
  out.reserve(count());
  for_each_set([&](std::size_t i) { out.push_back(static_cast<uint32_t>(i)); });
  return out;
}

void write(byte_writer& w, const dynamic_bitmap& b) {
  w.varint(b.size());
  std::size_t bytes = (b.size() + 7) / 8;
  std::vector<uint8_t> raw(bytes, 0);
  b.for_each_set([&](std::size_t i) { raw[i / 8] |= static_cast<uint8_t>(1u << (i % 8)); });
  for (auto v : raw) w.u8(v);
}

bool read(byte_reader& r, dynamic_bitmap& b) {
  uint64_t size = 0;
  if (!r.varint(size, "bitmap size")) return false;
  if (size > max_decoded_bitmap_bits) {
    return r.fail("bitmap size", "size " + std::to_string(size) + " bits over the limit");
  }
  std::size_t bytes = (size + 7) / 8;
  if (bytes > r.remaining()) return r.fail("bitmap bits", "truncated");
  b = dynamic_bitmap(size);
  for (std::size_t i = 0; i < bytes; ++i) {
    uint8_t v = 0;
    r.u8(v, "bitmap bits");
    for (int bit = 0; bit < 8; ++bit) {
      if (!(v >> bit & 1u)) continue;
      std::size_t index = i * 8 + bit;
      if (index >= size) return r.fail("bitmap bits", "bit " + std::to_string(index) + " set past the size");
      b.set(index);
    }
  }
  return true;
}

std::vector<std::byte> encode(const dynamic_bitmap& b) { return encode_value(b); }

result<dynamic_bitmap> decode_bitmap(std::span<const std::byte> in) { return decode_value<dynamic_bitmap>(in, "bitmap"); }

}  // namespace chorus
