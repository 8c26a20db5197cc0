// pack_range, unpack_range, copy_inputs, member_regions: member ∩ range over a fused bucket.
#include "actors/bucket_ranges.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace chorus {

namespace {

status missing(const op_ref& op, const char* role) {
  return {errc::internal, describe(op.spec) + ": no " + role + " buffer for a member of a fused bucket"};
}

/// Calls fn(member, lo, hi) for each member's part [lo, hi) (bucket offsets) of [begin, end),
/// in member order; fn returns a status, and the first error stops the walk.
template <class Fn>
status each_part(const bucket_job& job, std::size_t begin, std::size_t end, Fn&& fn) {
  for (const auto& m : job.plan.members) {
    if (m.offset >= end) break;
    std::size_t lo = std::max(begin, m.offset), hi = std::min(end, m.offset + m.bytes);
    if (lo >= hi) continue;
    if (auto st = fn(m, lo, hi); !st.ok()) return st;
  }
  return {};
}

}  // namespace

status pack_range(bucket_job& job, std::size_t begin, std::size_t end) {
  std::size_t cursor = begin;  // bytes of [begin, cursor) are written
  auto st = each_part(job, begin, end, [&](const bucket_member& m, std::size_t lo, std::size_t hi) -> status {
    const auto* from = static_cast<const std::byte*>(job.ops[m.id].input);
    if (!from) return missing(job.ops[m.id], "input");
    if (lo > cursor) std::memset(job.data + cursor, 0, lo - cursor);
    std::memcpy(job.data + lo, from + (lo - m.offset), hi - lo);
    cursor = hi;
    return {};
  });
  if (!st.ok()) return st;
  if (end > cursor) std::memset(job.data + cursor, 0, end - cursor);
  return {};
}

status unpack_range(const bucket_job& job, std::size_t begin, std::size_t end) {
  return each_part(job, begin, end, [&](const bucket_member& m, std::size_t lo, std::size_t hi) -> status {
    auto* to = static_cast<std::byte*>(job.ops[m.id].output);
    if (!to) return missing(job.ops[m.id], "output");
    if (to + (lo - m.offset) != job.data + lo) std::memcpy(to + (lo - m.offset), job.data + lo, hi - lo);
    return {};
  });
}

void copy_inputs(const bucket_job& job, std::size_t begin, std::size_t end) {
  each_part(job, begin, end, [&](const bucket_member& m, std::size_t lo, std::size_t hi) -> status {
    const auto& op = job.ops[m.id];
    if (op.input != op.output)
      std::memcpy(static_cast<std::byte*>(op.output) + (lo - m.offset),
                  static_cast<const std::byte*>(op.input) + (lo - m.offset), hi - lo);
    return {};
  });
}

std::vector<std::span<std::byte>> member_regions(const bucket_job& job, std::size_t begin, std::size_t end) {
  std::vector<std::span<std::byte>> out;
  each_part(job, begin, end, [&](const bucket_member& m, std::size_t lo, std::size_t hi) -> status {
    auto* base = job.scattered ? static_cast<std::byte*>(job.ops[m.id].output) : job.data + m.offset;
    out.emplace_back(base + (lo - m.offset), hi - lo);
    return {};
  });
  return out;
}

}  // namespace chorus
