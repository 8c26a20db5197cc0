// Encoding and strict decoding of the rendezvous store's frames (see kv_protocol.hpp).
// Decoding rejects every malformed body: unknown op or code, lengths past the end or the limits,
// trailing bytes.
#include "runtime/rendezvous/kv_protocol.hpp"

#include <charconv>

namespace chorus::kv {
namespace {

void put_u32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

// Writes the length prefix in front of a body built after it.
std::string finish_frame(std::string frame) {
  uint32_t body = static_cast<uint32_t>(frame.size() - header_bytes);
  for (size_t i = 0; i < header_bytes; ++i) frame[i] = static_cast<char>(body >> (24 - 8 * i));
  return frame;
}

// Reads fields front to back; the first failure sticks and names the field.
class reader {
 public:
  explicit reader(std::string_view body) : rest_(body) {}

  bool u8(uint8_t& v, const char* what) {
    if (rest_.empty()) return fail(what, "is missing");
    v = static_cast<uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return true;
  }
  bool u32(uint32_t& v, const char* what) {
    if (rest_.size() < 4) return fail(what, "is cut short");
    v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(rest_[i]);
    rest_.remove_prefix(4);
    return true;
  }
  bool str(std::string& s, uint32_t limit, const char* what) {
    uint32_t n = 0;
    if (!u32(n, what)) return false;
    if (n > limit) {
      return fail(what,
                  "length " + std::to_string(n) + " exceeds the limit " + std::to_string(limit));
    }
    if (rest_.size() < n) return fail(what, "length " + std::to_string(n) + " runs past the frame");
    s.assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }
  bool end() {
    if (rest_.empty()) return true;
    return fail("frame", std::to_string(rest_.size()) + " trailing bytes");
  }
  bool fail(const char* what, const std::string& why) {
    if (error_.empty()) error_ = std::string(what) + " " + why;
    return false;
  }
  status error() const { return {errc::protocol, "rendezvous frame: " + error_}; }
  size_t remaining() const { return rest_.size(); }

 private:
  std::string_view rest_;
  std::string error_;
};

}  // namespace

std::string encode_frame(const request& r) {
  std::string out(header_bytes, '\0');
  out.push_back(static_cast<char>(r.kind));
  put_u32(out, r.wait_ms);
  put_str(out, r.key);
  if (r.kind == op::set) put_str(out, r.value);
  if (r.kind == op::gather) put_u32(out, r.count);
  return finish_frame(std::move(out));
}

std::string encode_frame(const reply& r) {
  std::string out(header_bytes, '\0');
  out.push_back(static_cast<char>(r.code));
  put_str(out, r.message);
  put_u32(out, static_cast<uint32_t>(r.values.size()));
  for (const auto& v : r.values) put_str(out, v);
  put_u32(out, static_cast<uint32_t>(r.missing.size()));
  for (uint32_t m : r.missing) put_u32(out, m);
  return finish_frame(std::move(out));
}

uint32_t decode_length(const unsigned char (&header)[header_bytes]) {
  return (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) | (uint32_t{header[2]} << 8) |
         uint32_t{header[3]};
}

result<request> decode_request(std::string_view body) {
  reader in(body);
  request r;
  uint8_t kind = 0;
  if (!in.u8(kind, "op")) return in.error();
  if (kind < static_cast<uint8_t>(op::set) || kind > static_cast<uint8_t>(op::gather)) {
    return status{errc::protocol, "rendezvous frame: unknown op " + std::to_string(kind)};
  }
  r.kind = static_cast<op>(kind);
  if (!in.u32(r.wait_ms, "wait_ms") || !in.str(r.key, max_key_bytes, "key")) return in.error();
  if (r.key.empty()) return status{errc::protocol, "rendezvous frame: empty key"};
  if (r.kind == op::set && !in.str(r.value, max_value_bytes, "value")) return in.error();
  if (r.kind == op::gather) {
    if (!in.u32(r.count, "count")) return in.error();
    if (r.count > max_gather_count) {
      return status{errc::protocol, "rendezvous frame: gather count " + std::to_string(r.count) +
                                        " exceeds the limit " + std::to_string(max_gather_count)};
    }
  }
  if (!in.end()) return in.error();
  return r;
}

result<reply> decode_reply(std::string_view body) {
  reader in(body);
  reply r;
  uint8_t code = 0;
  if (!in.u8(code, "code")) return in.error();
  if (code > static_cast<uint8_t>(reply_code::bad_request)) {
    return status{errc::protocol, "rendezvous frame: unknown reply code " + std::to_string(code)};
  }
  r.code = static_cast<reply_code>(code);
  uint32_t n = 0;
  if (!in.str(r.message, max_frame_bytes, "message") || !in.u32(n, "value count"))
    return in.error();
  // Each value takes at least its 4-byte length: a count beyond that is a lie, not a big reply.
  if (n > in.remaining() / 4)
    return status{errc::protocol,
                  "rendezvous frame: value count " + std::to_string(n) + " runs past the frame"};
  r.values.resize(n);
  for (auto& v : r.values) {
    if (!in.str(v, max_frame_bytes, "value")) return in.error();
  }
  if (!in.u32(n, "missing count")) return in.error();
  if (n > in.remaining() / 4)
    return status{errc::protocol,
                  "rendezvous frame: missing count " + std::to_string(n) + " runs past the frame"};
  r.missing.resize(n);
  for (auto& m : r.missing) in.u32(m, "missing index");
  if (!in.end()) return in.error();
  return r;
}

std::string indexed_key(const std::string& prefix, uint32_t index) {
  return prefix + std::to_string(index);
}

bool parse_indexed_key(std::string_view key, std::string_view prefix, uint32_t& index) {
  if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) return false;
  auto digits = key.substr(prefix.size());
  if (digits.size() > 1 && digits.front() == '0') return false;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  return ec == std::errc() && end == digits.data() + digits.size();
}

}  // namespace chorus::kv
