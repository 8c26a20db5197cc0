// pack() and unpack() (see pack.hpp). Lookups are resolved and checked before the first
// copy, so an error leaves every buffer untouched.
#include "runtime/fusion/pack.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace chorus {
namespace {

status too_small(const char* what, const bucket& b, std::size_t have) {
  return status{errc::invalid_argument, std::string(what) + ": buffer of " + std::to_string(have) +
                                            " bytes for a bucket of " + std::to_string(b.bytes) + " bytes (" +
                                            std::to_string(b.members.size()) + " tensors)"};
}

status missing(const char* what, const char* role, uint32_t id, std::size_t bytes) {
  return status{errc::internal, std::string(what) + ": no " + role + " buffer for tensor id " + std::to_string(id) +
                                    " (" + std::to_string(bytes) + " bytes) of this bucket"};
}

}  // namespace

status pack(const bucket& b, const pack_source& sources, std::span<std::byte> dst) {
  if (dst.size() < b.bytes) return too_small("pack", b, dst.size());
  std::vector<const void*> from(b.members.size());
  for (std::size_t i = 0; i < b.members.size(); ++i) {
    const auto& m = b.members[i];
    if (m.bytes == 0) continue;
    from[i] = sources(m.id);
    if (from[i] == nullptr) return missing("pack", "source", m.id, m.bytes);
  }
  std::size_t end = 0;  // end of the previous member: [end, m.offset) is padding
  for (std::size_t i = 0; i < b.members.size(); ++i) {
    const auto& m = b.members[i];
    if (m.offset > end) std::memset(dst.data() + end, 0, m.offset - end);
    if (m.bytes > 0) std::memcpy(dst.data() + m.offset, from[i], m.bytes);
    end = m.offset + m.bytes;
  }
  return {};
}

status unpack(const bucket& b, std::span<const std::byte> src, const unpack_destination& destinations) {
  if (src.size() < b.bytes) return too_small("unpack", b, src.size());
  std::vector<void*> to(b.members.size());
  for (std::size_t i = 0; i < b.members.size(); ++i) {
    const auto& m = b.members[i];
    if (m.bytes == 0) continue;
    to[i] = destinations(m.id);
    if (to[i] == nullptr) return missing("unpack", "destination", m.id, m.bytes);
  }
  for (std::size_t i = 0; i < b.members.size(); ++i) {
    const auto& m = b.members[i];
    const std::byte* from = src.data() + m.offset;
    if (m.bytes > 0 && to[i] != from) std::memcpy(to[i], from, m.bytes);
  }
  return {};
}

}  // namespace chorus
