// Names of record kinds, the block checksum and the fixed-width integer helpers.
#include "telemetry/trace/format.hpp"

namespace chorus::telemetry::trace {

std::string_view name_of(record_kind k) {
  switch (k) {
    case record_kind::string: return "string";
    case record_kind::tunables: return "tunables";
    case record_kind::enqueue: return "enqueue";
    case record_kind::callback: return "callback";
    case record_kind::ready: return "ready";
    case record_kind::gossip_sent: return "gossip_sent";
    case record_kind::gossip_received: return "gossip_received";
    case record_kind::cycle: return "cycle";
    case record_kind::agreed: return "agreed";
    case record_kind::stall: return "stall";
    case record_kind::bucket: return "bucket";
    case record_kind::chunk_start: return "chunk_start";
    case record_kind::chunk_end: return "chunk_end";
    case record_kind::steal: return "steal";
    case record_kind::error: return "error";
    case record_kind::lost: return "lost";
    case record_kind::limit: return "limit";
    case record_kind::end: return "end";
    case record_kind::autotune: return "autotune";
    case record_kind::compressed: return "compressed";
    case record_kind::direct_path: return "direct_path";
    case record_kind::call: return "call";
  }
  return "unknown";
}

namespace {

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

}  // namespace

uint32_t crc32(std::span<const std::byte> data) {
  static const auto table = make_crc_table();
  uint32_t c = 0xFFFFFFFFu;
  for (auto b : data) c = table[(c ^ static_cast<uint8_t>(b)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void put_u16(std::byte* at, uint16_t v) {
  for (int i = 0; i < 2; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_u32(std::byte* at, uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_u64(std::byte* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}
uint16_t get_u16(const std::byte* at) {
  return static_cast<uint16_t>(static_cast<uint16_t>(at[0]) | (static_cast<uint16_t>(at[1]) << 8));
}
uint32_t get_u32(const std::byte* at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(at[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const std::byte* at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(at[i]) << (8 * i);
  return v;
}

}  // namespace chorus::telemetry::trace
