// Settings every rank of a job must be given alike, checked at init: the collective settings
// that decide which path or algorithm an allreduce takes (ranks given different values would
// each pick their own, one a mailbox, the other a ring, and wait for each other for ever), and
// the pipeline's (actors/pipeline.cpp: how tensors are fused and cut into chunks). Every rank
// publishes its values through the rendezvous and compares every rank's with rank 0's, so all
// fail with the same error, naming the variable, the ranks and their values.
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
using setting_list = std::vector<std::pair<std::string, std::string>>;
setting_list deciding_settings(const collective_options& o);

/// "NAME=value\n" lines, as published.
std::string encode_settings(const setting_list& s);
/// Rank `rank`'s published text read as `shape`'s variables, in its order; errc::protocol
/// (naming the rank, its text shortened) when it is not those lines.
result<setting_list> decode_settings(const std::string& text, const setting_list& shape, int rank);
/// errc::config naming the first variable whose value on rank `their_rank` is not rank 0's;
/// `why` says what the settings decide.
status compare_settings(const setting_list& rank0, const setting_list& theirs, int their_rank,
                        const std::string& why = "it decides which path or algorithm each allreduce takes");

/// Publishes `mine` under `prefix` + rank, gathers every rank's and compares each with rank 0's.
status agree_settings(rendezvous& rdv, const std::string& prefix, const setting_list& mine, const std::string& why,
                      std::chrono::milliseconds timeout);
/// The collective settings (deciding_settings), under "settings/".
status agree_settings(rendezvous& rdv, const collective_options& o, std::chrono::milliseconds timeout);

}  // namespace chorus
