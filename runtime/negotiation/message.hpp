// The one message both negotiation strategies exchange, and its merge. A message carries a
// header (kind, cycle, round, sender) and a payload that is a join-semilattice: merge() is
// idempotent, commutative and associative (AND/OR of bitmaps, union of per-rank
// announcements and reports, min of the score, OR of the shutdown flag and joined ranks). That is what makes
// the dissemination exchange reach the same state on every rank for any N and any delivery
// order. Sent by gossip_negotiator and central_negotiator; the negotiator actor forwards it.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/bitmap.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::negotiation {

/// A name announced with one spec by a set of ranks. A name announced with two different
/// specs appears twice, once per spec, so a mismatch can say which ranks had which value.
struct announcement {
  tensor_spec spec;      ///< spec.name is the announced name
  dynamic_bitmap ranks;  ///< ranks that announced the name with exactly this spec
  bool operator==(const announcement&) const = default;
};

/// The ranks whose autotuner submitted proposal digest `digest` with their window score
/// (autotuner: every rank computes the same proposal, so one group is expected).
struct digest_group {
  uint64_t digest = 0;
  dynamic_bitmap ranks;
  bool operator==(const digest_group&) const = default;
};

/// Which ranks have a stalled tensor id pending (the second phase of a stall query).
struct stall_report {
  uint32_t id = 0;
  dynamic_bitmap ranks;
  bool operator==(const stall_report&) const = default;
};

enum class message_kind : uint8_t {
  gossip = 0,  ///< gossip: one dissemination round of a cycle
  report = 1,  ///< central: a worker's contribution to rank 0
  poll = 2,    ///< central: rank 0 asks an idle worker for its (possibly empty) contribution
  answer = 3,  ///< central: rank 0's merged state of the cycle, sent to every worker
};

/// Rank `from`'s merged view in round `round` of cycle `cycle`.
struct gossip_message {
  message_kind kind = message_kind::gossip;
  uint64_t cycle = 0;
  uint32_t round = 0;
  int from = -1;
  bool open_next = false;  ///< central answer: rank 0 opened cycle+1 already, report to it at once
  dynamic_bitmap ready_and;                     ///< ids pending on every contributing rank (AND)
  dynamic_bitmap ready_or;                      ///< ids pending on some contributing rank (OR)
  std::vector<announcement> announced;          ///< names with specs (first uses, new specs), sorted (union)
  dynamic_bitmap stall_query;                   ///< ids some rank finds stalled (OR)
  dynamic_bitmap stall_abort;                   ///< ids some rank wants to stop the job for (OR)
  std::vector<std::string> stalled_names;       ///< announced names some rank finds stalled (sorted union)
  std::vector<std::string> abort_names;         ///< announced names some rank wants to stop for (sorted union)
  std::vector<stall_report> reports;            ///< sorted by id (union of rank sets)
  double score_min = std::numeric_limits<double>::infinity();  ///< autotuner window score (min)
  bool shutdown = false;                        ///< some rank asked the job to shut down (OR)
  dynamic_bitmap joined;                        ///< ranks that called join and wait for the rest (OR)
  dynamic_bitmap scored;                        ///< ranks that submitted a window score (OR)
  std::vector<digest_group> digests;            ///< autotuner proposal digests, sorted (union of rank sets)

  bool operator==(const gossip_message&) const = default;
};

/// Merges `from`'s payload into `into`'s (the header of `into` is left alone). Keeps the
/// sorted orders above, so equal payloads compare equal however they were merged.
void merge(gossip_message& into, const gossip_message& from);

/// Clears the payload, keeping the header.
void clear_payload(gossip_message& m);

/// Compact binary form (varints, bitmaps as bits, specs as in tensor_spec.hpp), for the
/// control plane. decode() fails with errc::protocol naming what was truncated or invalid.
std::vector<std::byte> encode(const gossip_message& m);
result<gossip_message> decode_message(std::span<const std::byte> in);

}  // namespace chorus::negotiation
