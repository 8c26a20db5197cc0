// pack_range / unpack_range: member ∩ range copies over a fused bucket.
#include "actors/bucket_ranges.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace chorus {

namespace {

status missing(const op_ref& op, const char* role) {
  return {errc::internal, describe(op.spec) + ": no " + role + " buffer for a member of a fused bucket"};
}

}  // namespace

status pack_range(bucket_job& job, std::size_t begin, std::size_t end) {
  std::size_t cursor = begin;  // bytes of [begin, cursor) are written
  for (const auto& m : job.plan.members) {
    std::size_t lo = std::max(begin, m.offset), hi = std::min(end, m.offset + m.bytes);
    if (m.offset >= end) break;
    if (lo >= hi) continue;
    const auto* from = static_cast<const std::byte*>(job.ops[m.id].input);
    if (!from) return missing(job.ops[m.id], "input");
    if (lo > cursor) std::memset(job.data + cursor, 0, lo - cursor);
    std::memcpy(job.data + lo, from + (lo - m.offset), hi - lo);
    cursor = hi;
  }
  if (end > cursor) std::memset(job.data + cursor, 0, end - cursor);
  return {};
}

status unpack_range(const bucket_job& job, std::size_t begin, std::size_t end) {
  for (const auto& m : job.plan.members) {
    std::size_t lo = std::max(begin, m.offset), hi = std::min(end, m.offset + m.bytes);
    if (m.offset >= end) break;
    if (lo >= hi) continue;
    auto* to = static_cast<std::byte*>(job.ops[m.id].output);
    if (!to) return missing(job.ops[m.id], "output");
    if (to + (lo - m.offset) != job.data + lo) std::memcpy(to + (lo - m.offset), job.data + lo, hi - lo);
  }
  return {};
}

void copy_inputs(const bucket_job& job, std::size_t begin, std::size_t end) {
  for (const auto& m : job.plan.members) {
    std::size_t lo = std::max(begin, m.offset), hi = std::min(end, m.offset + m.bytes);
    if (m.offset >= end) break;
    const auto& op = job.ops[m.id];
    if (lo >= hi || op.input == op.output) continue;
    std::memcpy(static_cast<std::byte*>(op.output) + (lo - m.offset),
                static_cast<const std::byte*>(op.input) + (lo - m.offset), hi - lo);
  }
}

std::vector<std::span<std::byte>> member_regions(const bucket_job& job, std::size_t begin, std::size_t end) {
  std::vector<std::span<std::byte>> out;
  for (const auto& m : job.plan.members) {
    std::size_t lo = std::max(begin, m.offset), hi = std::min(end, m.offset + m.bytes);
    if (m.offset >= end) break;
    if (lo >= hi) continue;
    auto* base = job.scattered ? static_cast<std::byte*>(job.ops[m.id].output) : job.data + m.offset;
    out.emplace_back(base + (lo - m.offset), hi - lo);
  }
  return out;
}

}  // namespace chorus
