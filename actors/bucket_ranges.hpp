// Copies between the ops' tensors and one byte range of a fused bucket's buffer, so fusion can
// pack each chunk just before it is handed out and completion can unpack each chunk as soon
// as it ends: copies overlap the transfer of other chunks instead of bracketing the bucket.
// Same layout rules as runtime/fusion/pack.hpp (gaps zeroed on pack, skipped on unpack).
// (Candidates for runtime/fusion/pack.hpp; they live here until its owner takes them.)
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "actors/protocol.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

/// Copies the members' inputs that fall in [begin, end) of the bucket into job.data and
/// zeroes the gaps there. errc::internal naming the tensor when a member has no input.
status pack_range(bucket_job& job, std::size_t begin, std::size_t end);

/// Copies [begin, end) of job.data into the members' outputs (skipping bytes that already
/// are the output). errc::internal naming the tensor when a member has no output.
status unpack_range(const bucket_job& job, std::size_t begin, std::size_t end);

/// Copies the out-of-place members' inputs that fall in [begin, end) of a scattered bucket to
/// their outputs (bucket_job::scattered: the chunk then runs on the outputs).
void copy_inputs(const bucket_job& job, std::size_t begin, std::size_t end);

/// The members' bytes that fall in [begin, end) of a fused bucket, in member order, the gaps
/// between them left out: in the members' outputs for a scattered bucket
/// (bucket_job::scattered), else in job.data. What a direct chunk of a fused bucket runs on,
/// so that every rank posts the same bytes whether it packed the bucket or not.
std::vector<std::span<std::byte>> member_regions(const bucket_job& job, std::size_t begin, std::size_t end);

}  // namespace chorus
