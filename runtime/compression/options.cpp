// Names of the wire options, as CHORUS_COMPRESSION and CHORUS_NAN_CHECK spell them.
#include "runtime/compression/options.hpp"

#include <cstddef>

namespace chorus {

namespace {

// Each enum's words, indexed by its value.
constexpr std::string_view compression_words[compression_count] = {"none", "fp16", "bf16"};
constexpr std::string_view nan_check_words[nan_check_count] = {"off", "error", "skip"};

template <class E, std::size_t N>
std::string_view word_of(const std::string_view (&words)[N], E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? words[i] : "unknown";
}

template <class E, std::size_t N>
std::optional<E> parse_word(const std::string_view (&words)[N], std::string_view s) {
  for (std::size_t i = 0; i < N; ++i)
    if (words[i] == s) return E(i);
  return std::nullopt;
}

}  // namespace

std::string_view name_of(compression c) { return word_of(compression_words, c); }

std::optional<compression> parse_compression(std::string_view s) {
  return parse_word<compression>(compression_words, s);
}

std::string_view name_of(nan_check c) { return word_of(nan_check_words, c); }

std::optional<nan_check> parse_nan_check(std::string_view s) { return parse_word<nan_check>(nan_check_words, s); }

std::string_view name_of(shm_compression m) { return m == shm_compression::on ? "on" : "auto"; }

std::optional<shm_compression> parse_shm_compression(std::string_view s) {
  if (s == "auto") return shm_compression::automatic;
  if (s == "on") return shm_compression::on;
  return std::nullopt;
}

}  // namespace chorus
