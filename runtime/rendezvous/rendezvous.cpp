// What every rendezvous shares: rank lists for messages, hex for values that travel as text.
#include "runtime/rendezvous/rendezvous.hpp"

namespace chorus {

std::string format_rank_list(const std::vector<uint32_t>& ranks, size_t max_items) {
  std::string out;
  size_t items = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (items == max_items) {
      out += ",... (" + std::to_string(ranks.size()) + " in all)";
      break;
    }
    if (!out.empty()) out += ",";
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      i += 1;
    }
    ++items;
  }
  return out;
}

std::string to_hex(const void* bytes, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(bytes);
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back("0123456789abcdef"[b[i] >> 4]);
    out.push_back("0123456789abcdef"[b[i] & 15]);
  }
  return out;
}

result<std::string> from_hex(const std::string& hex) {
  auto digit = [](char c) -> int {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return status{errc::invalid_argument, "hex text of odd length " + std::to_string(hex.size())};
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return status{errc::invalid_argument, "not hex at character " + std::to_string(2 * i)};
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace chorus
