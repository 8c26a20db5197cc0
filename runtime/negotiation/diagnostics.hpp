// The texts of agreed negotiation errors. They are built only from replicated state and
// settings, so every rank prints exactly the same words.
#pragma once

#include <string>
#include <vector>

#include "runtime/negotiation/bitmap.hpp"
#include "runtime/negotiation/message.hpp"
#include "runtime/negotiation/strategy.hpp"

namespace chorus::negotiation {

/// "rank 3", "ranks 0-2", "ranks 0-2,5,7-9", "no rank".
std::string format_ranks(const dynamic_bitmap& ranks);
std::vector<int> rank_list(const dynamic_bitmap& ranks);

/// The ranks in [0, size) not in `ranks`.
dynamic_bitmap complement(const dynamic_bitmap& ranks, int size);

/// One name announced with several specs (groups sorted by spec_less):
/// "allreduce('fc1.weight'): shape [512,256] on rank 3 but [512,128] on ranks 0-2". The
/// largest group (lowest rank on ties) is the reference; every other group adds a clause.
std::string mismatch_message(const std::vector<announcement>& groups);

/// "duration" in seconds as a human reads it: "60 s", "0.25 s".
std::string format_seconds(duration d);

/// "stall: allreduce('g'): ready on ranks 0-2 but not produced by rank 3 after 60 s
/// (CHORUS_STALL_CHECK_TIME_SECONDS)"; with `shutdown` the job-stopping variant. Only `members`
/// (the operation's process set) are named: ranks outside it neither wait nor lag.
std::string stall_message(const tensor_spec& spec, const dynamic_bitmap& ready, const dynamic_bitmap& members,
                          const negotiation_options& options, bool shutdown);

/// Why an operation agreed while `joined` ranks have joined cannot run (empty when it can): an
/// allgather, alltoall or broadcast, as in Horovod (a joined rank has no rows to give, and
/// Horovod refuses broadcasts too; one whose root joined has nothing to send). "allgather('g'):
/// rank 1 has joined (join); ..." naming every joined rank.
std::string join_refusal(const tensor_spec& spec, const dynamic_bitmap& joined);

}  // namespace chorus::negotiation
