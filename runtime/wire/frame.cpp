// Encoding and validation of data-plane frame headers.
#include "runtime/wire/frame.hpp"

#include <cstring>
#include <sstream>

namespace chorus::wire {
namespace {

template <class T>
void put(std::byte*& p, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    *p++ = static_cast<std::byte>(static_cast<uint64_t>(v) >> (8 * i) & 0xff);
  }
}

template <class T>
T get(const std::byte*& p) {
  uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(*p++) << (8 * i);
  return static_cast<T>(v);
}

// The fields in order, each as wide as its type (frame_header's types are the wire's).
template <class... T>
void put_fields(std::byte*& p, const T&... v) {
  (put<T>(p, v), ...);
}

template <class... T>
void get_fields(const std::byte*& p, T&... v) {
  ((v = get<T>(p)), ...);
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

}  // namespace

bool is_known_kind(uint16_t kind) {
  switch (static_cast<frame_kind>(kind)) {
    case frame_kind::data: case frame_kind::goodbye: case frame_kind::abort: case frame_kind::control:
    case frame_kind::shm_wake: case frame_kind::heartbeat: case frame_kind::shm_pad:
    case frame_kind::hello:
    case frame_kind::challenge: case frame_kind::proof: case frame_kind::accept:
    case frame_kind::reject:
      return true;
  }
  return false;
}

void encode(const frame_header& h, std::byte* out) {
  std::byte* p = out;
  put<uint32_t>(p, frame_magic);
  put<uint16_t>(p, protocol_version);
  put<uint16_t>(p, static_cast<uint16_t>(h.kind));
  put_fields(p, h.job_id, h.sequence, h.step, h.length, h.offset);
}

result<frame_header> decode(const std::byte* in, std::size_t available, const frame_limits& limits) {
  if (available < frame_header_size) {
    return status{errc::protocol, "truncated frame header: " + std::to_string(available) + " of " +
                                      std::to_string(frame_header_size) + " bytes"};
  }
  const std::byte* p = in;
  auto magic = get<uint32_t>(p);
  if (magic != frame_magic)
    return status{errc::protocol, "wrong magic " + hex(magic) + ", expected " + hex(frame_magic)};
  auto version = get<uint16_t>(p);
  if (version != protocol_version)
    return status{errc::protocol, "protocol version " + std::to_string(version) + ", expected " +
                                      std::to_string(protocol_version)};
  auto kind = get<uint16_t>(p);
  if (!is_known_kind(kind)) return status{errc::protocol, "unknown frame kind " + std::to_string(kind)};
  frame_header h;
  h.kind = static_cast<frame_kind>(kind);
  get_fields(p, h.job_id, h.sequence, h.step, h.length, h.offset);
  if (h.job_id != limits.job_id)
    return status{errc::protocol, "frame of job " + hex(h.job_id) + ", expected job " + hex(limits.job_id)};
  if (h.length > limits.max_payload)
    return status{errc::protocol, "payload length " + std::to_string(h.length) + " over the limit " +
                                      std::to_string(limits.max_payload)};
  return h;
}

std::string describe(const frame_header& h) {
  std::ostringstream os;
  os << "kind=" << static_cast<int>(h.kind) << " seq=" << h.sequence << " step=" << h.step
     << " offset=" << h.offset << " length=" << h.length;
  return os.str();
}

}  // namespace chorus::wire
