// The reader: parsing by kind, the alias rule and the error text every variable shares.
#include "runtime/config/reader.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>

namespace chorus::cfg {
namespace {

std::string quoted(std::string_view name, std::string_view text) {
  return std::string(name) + "='" + std::string(text) + "'";
}

std::string default_note(const variable& v) {
  return v.fallback.empty() ? std::string() : " (default " + std::string(v.fallback) + ")";
}

/// `v` under its name, else its alias, else its default, parsed by `parse(name, text)`; the name
/// and the alias both set must give the same value.
template <class T, class Parse>
result<T> read_one(const env_lookup& get, const variable& v, Parse parse) {
  auto lookup = [&](std::string_view n) -> const char* {
    if (n.empty()) return nullptr;
    const char* t = get(std::string(n).c_str());
    return (t && *t) ? t : nullptr;
  };
  const char* a = lookup(v.name);
  const char* b = lookup(v.alias);
  if (!a && !b) {
    auto d = parse(v.name, v.fallback);
    if (!d) return status{errc::internal, "the default of " + std::string(v.name) + " does not parse: " +
                                              d.error().message()};
    return d;
  }
  std::optional<T> va, vb;
  if (a) {
    auto r = parse(v.name, a);
    if (!r) return r.error();
    va = *r;
  }
  if (b) {
    auto r = parse(v.alias, b);
    if (!r) return r.error();
    vb = *r;
  }
  if (va && vb && !(*va == *vb))
    return status{errc::config, quoted(v.name, a) + " contradicts " + quoted(v.alias, b) + "; set one of them"};
  return va ? *va : *vb;
}

/// read_one for a number parsed by `parse(name, text)`: a value out of range names the default too.
template <class T, class Parse>
result<T> read_number(const env_lookup& get, const variable& var, Parse parse) {
  return read_one<T>(get, var, [&](std::string_view n, std::string_view t) -> result<T> {
    auto r = parse(n, t);
    if (!r) return status{errc::config, r.error().message() + default_note(var)};
    return r;
  });
}

}  // namespace

env_lookup process_lookup() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

status bad_value(std::string_view name, std::string_view text, std::string_view expected) {
  return {errc::config, quoted(name, text) + " is not allowed: expected " + std::string(expected)};
}

result<uint64_t> parse_whole(std::string_view name, std::string_view text, uint64_t min, uint64_t max) {
  auto expected = [&] {
    return "a whole number in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  };
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || text.front() == '-' || text.front() == '+' || ec != std::errc{} ||
      end != text.data() + text.size() || n < min || n > max)
    return bad_value(name, text, expected());
  return n;
}

result<double> parse_decimal(std::string_view name, std::string_view text, double min, double max) {
  auto expected = [&] { return "a number in [" + number_text(min) + ", " + number_text(max) + "]"; };
  double d = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(d) || d < min ||
      d > max)
    return bad_value(name, text, expected());
  return d;
}

reader::reader(env_lookup get) : get_(std::move(get)) {
  if (!get_) get_ = [](const char*) -> const char* { return nullptr; };
}

const char* reader::get(std::string_view name) const { return get_(std::string(name).c_str()); }

result<const variable*> reader::entry(std::string_view name, kind k) const {
  const variable* v = find(name);
  if (!v) return status{errc::internal, "config: " + std::string(name) + " is not in the variable table"};
  if (v->type != k) return status{errc::internal, "config: " + std::string(name) + " read as the wrong kind"};
  return v;
}

result<uint64_t> reader::whole(std::string_view name) const {
  auto v = entry(name, kind::whole);
  if (!v) return v.error();
  const variable& var = **v;
  return read_number<uint64_t>(get_, var, [&](std::string_view n, std::string_view t) {
    return parse_whole(n, t, static_cast<uint64_t>(var.min), static_cast<uint64_t>(var.max));
  });
}

result<double> reader::decimal(std::string_view name) const {
  auto v = entry(name, kind::decimal);
  if (!v) return v.error();
  const variable& var = **v;
  return read_number<double>(get_, var, [&](std::string_view n, std::string_view t) {
    return parse_decimal(n, t, var.min, var.max);
  });
}

result<std::string> reader::choice(std::string_view name) const {
  auto v = entry(name, kind::choice);
  if (!v) return v.error();
  const variable& var = **v;
  return read_one<std::string>(
      get_, var,
      [&](std::string_view n, std::string_view t) -> result<std::string> {
        std::string_view rest = var.choices;
        while (!rest.empty()) {
          auto bar = rest.find('|');
          if (rest.substr(0, bar) == t) return std::string(canonical_choice(var, t));
          rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
        }
        return status{errc::config, bad_value(n, t, allowed(var)).message() + default_note(var)};
      });
}

result<bool> reader::flag(std::string_view name) const {
  auto c = choice(name);
  if (!c) return c.error();
  if (*c != "0" && *c != "1")
    return status{errc::internal, "config: " + std::string(name) + " is not a 0|1 choice"};
  return *c == "1";
}

result<std::string> reader::text(std::string_view name) const {
  auto v = entry(name, kind::text);
  if (!v) return v.error();
  return read_one<std::string>(get_, **v,
                               [](std::string_view, std::string_view t) -> result<std::string> {
                                 return std::string(t);
                               });
}

bool reader::is_set(std::string_view name) const {
  const variable* v = find(name);
  if (!v) return false;
  for (std::string_view n : {v->name, v->alias}) {
    if (n.empty()) continue;
    const char* t = get(n);
    if (t && *t) return true;
  }
  return false;
}

}  // namespace chorus::cfg
