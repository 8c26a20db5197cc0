// The collective settings that decide which path or algorithm an allreduce takes, checked alike
// on every rank at init: ranks given different values would each pick their own (one a mailbox,
// the other a ring) and wait for each other for ever. Every rank publishes its values through
// the rendezvous and compares every rank's with rank 0's, so all fail with the same error,
// naming the variable, the ranks and their values.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/rendezvous/rendezvous.hpp"

namespace chorus {

struct collective_options;

/// (variable, value) of each such setting, in a fixed order.
using settings = std::vector<std::pair<std::string, std::string>>;
settings deciding_settings(const collective_options& o);

/// "NAME=value\n" lines, as published.
std::string encode_settings(const settings& s);
/// Rank `rank`'s published text read as `shape`'s variables, in its order; errc::protocol
/// (naming the rank, its text shortened) when it is not those lines.
result<settings> decode_settings(const std::string& text, const settings& shape, int rank);
/// errc::config naming the first variable whose value on rank `their_rank` is not rank 0's.
status compare_settings(const settings& rank0, const settings& theirs, int their_rank);

/// Publishes ours, gathers every rank's and compares each with rank 0's.
status agree_settings(rendezvous& rdv, const collective_options& o, std::chrono::milliseconds timeout);

}  // namespace chorus
