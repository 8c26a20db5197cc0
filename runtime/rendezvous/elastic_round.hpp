// Elastic jobs: chorusrun (--min-np/--max-np) serves the rendezvous store itself and forms the
// job in numbered rounds; a worker keeps its worker id for life, and gets a rank per round.
// The launcher's keys in that store, all of them (rendezvous keys of round k live under
// "round/<k>/", rendezvous.cpp):
//   elastic/latest            "<k>": the newest round; set after round k's assignments
//   elastic/next/<r>          "<k>": round r was followed by round k; set after latest
//   elastic/assign/<k>/<w>    "rank R size N local_rank L local_size M" for worker w in round k,
//                             "stop <why>" when the job ends (fewer workers than --min-np), or
//                             "leave <why>" when the launcher removed worker w (fewer slots)
//   elastic/want/<r>          "<w>": worker w left round r (an operation failed) and asks for a
//                             new round; the launcher forms one unless it already has
// A worker joining after round r (1) sets want/<r>, (2) waits for next/<r> (the launcher may
// take up to env.elastic_timeout to find slots for it), (3) reads latest and (4) its assignment
// there; the first init() of a worker goes straight to (3).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/core/status.hpp"
#include "runtime/env/process_env.hpp"

namespace chorus::elastic {

/// A worker's place in one round.
struct assignment {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
};

std::string latest_key();
std::string next_key(int64_t round);
std::string assign_key(int64_t round, int worker);
std::string want_key(int64_t round);

/// "rank R size N local_rank L local_size M".
std::string encode_assignment(const assignment& a);
/// "stop <why>".
std::string encode_stop(const std::string& why);
/// "leave <why>".
std::string encode_leave(const std::string& why);

/// The assignment in `text`. A "stop" comes back as errc::rendezvous with the launcher's words; a
/// "leave" as errc::rendezvous "worker W was removed from the job by chorusrun in round K: <why>"
/// (removed() tells it apart); anything else that does not parse as errc::protocol naming the
/// worker and round.
result<assignment> decode_assignment(std::string_view text, int worker, int64_t round);

/// In the message of a "leave" assignment: this worker is not needed any more and should end
/// cleanly (hvd.elastic.run exits the process with status 0).
inline constexpr const char* removed_phrase = "was removed from the job by chorusrun";
bool removed(const status& st);

/// The environment of the round this worker joins: `env` with rank, size, local rank and size
/// and elastic_round replaced. `left_round` < 0: the first init (the newest round, which the
/// launcher started this worker into or formed since); else the round this worker left (steps
/// 1-4 above). Each wait ends by env.rendezvous_timeout. Errors: errc::rendezvous (the store is
/// unreachable, no new round came, the launcher ended the job), errc::protocol.
result<process_env> join_round(const process_env& env, int64_t left_round);

/// In the message of a rendezvous wait that ended because the launcher formed a newer round
/// (rendezvous.cpp); superseded() tells such a status apart: init() then joins the next round.
inline constexpr const char* superseded_phrase = "was superseded by round";
bool superseded(const status& st);

/// The newest round the launcher formed (elastic/latest), without waiting.
result<int64_t> latest_round(const process_env& env);

}  // namespace chorus::elastic
