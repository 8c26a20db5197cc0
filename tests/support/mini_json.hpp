// Test helper: a small strict JSON reader (RFC 8259 values; \u escapes below U+0800 decoded,
// others kept as '?'), for reading Prometheus' HTTP API answers and the Grafana dashboard.
// Throws std::runtime_error naming the byte offset on malformed input.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace chorus::testing {

struct json {
  using array = std::vector<json>;
  using object = std::map<std::string, json>;
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<array>, std::shared_ptr<object>> v;

  bool is_object() const { return v.index() == 5; }
  bool is_array() const { return v.index() == 4; }
  bool is_string() const { return v.index() == 3; }
  const object& obj() const { return *std::get<5>(v); }
  const array& arr() const { return *std::get<4>(v); }
  const std::string& str() const { return std::get<3>(v); }
  double num() const { return std::get<2>(v); }
  /// Member `k` of an object; a null value when absent or not an object.
  const json& operator[](const std::string& k) const {
    static const json none;
    if (!is_object()) return none;
    auto it = obj().find(k);
    return it == obj().end() ? none : it->second;
  }
  const json& operator[](std::size_t i) const {
    static const json none;
    if (!is_array() || i >= arr().size()) return none;
    return arr()[i];
  }

  static json parse(const std::string& text) {
    std::size_t pos = 0;
    json j = parse_value(text, pos);
    skip_ws(text, pos);
    if (pos != text.size()) fail(pos, "trailing characters");
    return j;
  }

 private:
  [[noreturn]] static void fail(std::size_t pos, const std::string& what) {
    throw std::runtime_error("json: " + what + " at byte " + std::to_string(pos));
  }
  static void skip_ws(const std::string& s, std::size_t& p) {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\r' || s[p] == '\t')) ++p;
  }
  static void expect(const std::string& s, std::size_t& p, const char* word) {
    for (const char* w = word; *w; ++w, ++p)
      if (p >= s.size() || s[p] != *w) fail(p, std::string("expected ") + word);
  }
  static std::string parse_string(const std::string& s, std::size_t& p) {
    if (p >= s.size() || s[p] != '"') fail(p, "expected a string");
    std::string out;
    for (++p;; ++p) {
      if (p >= s.size()) fail(p, "unterminated string");
      char c = s[p];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++p >= s.size()) fail(p, "unterminated escape");
      switch (s[p]) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (p + 4 >= s.size()) fail(p, "short \\u escape");
          unsigned cp = static_cast<unsigned>(std::strtoul(s.substr(p + 1, 4).c_str(), nullptr, 16));
          p += 4;
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += '?';
          }
          break;
        }
        default: out += s[p];
      }
    }
    ++p;
    return out;
  }
  static json parse_value(const std::string& s, std::size_t& p) {
    skip_ws(s, p);
    if (p >= s.size()) fail(p, "unexpected end");
    json j;
    char c = s[p];
    if (c == '{') {
      auto o = std::make_shared<object>();
      ++p;
      skip_ws(s, p);
      if (p < s.size() && s[p] == '}') {
        ++p;
      } else {
        for (;;) {
          skip_ws(s, p);
          std::string k = parse_string(s, p);
          skip_ws(s, p);
          expect(s, p, ":");
          (*o)[k] = parse_value(s, p);
          skip_ws(s, p);
          if (p < s.size() && s[p] == ',') {
            ++p;
            continue;
          }
          expect(s, p, "}");
          break;
        }
      }
      j.v = o;
    } else if (c == '[') {
      auto a = std::make_shared<array>();
      ++p;
      skip_ws(s, p);
      if (p < s.size() && s[p] == ']') {
        ++p;
      } else {
        for (;;) {
          a->push_back(parse_value(s, p));
          skip_ws(s, p);
          if (p < s.size() && s[p] == ',') {
            ++p;
            continue;
          }
          expect(s, p, "]");
          break;
        }
      }
      j.v = a;
    } else if (c == '"') {
      j.v = parse_string(s, p);
    } else if (c == 't') {
      expect(s, p, "true");
      j.v = true;
    } else if (c == 'f') {
      expect(s, p, "false");
      j.v = false;
    } else if (c == 'n') {
      expect(s, p, "null");
    } else {
      const char* start = s.c_str() + p;
      char* end = nullptr;
      double d = std::strtod(start, &end);
      if (end == start) fail(p, "unexpected character");
      p += static_cast<std::size_t>(end - start);
      j.v = d;
    }
    return j;
  }
};

}  // namespace chorus::testing
