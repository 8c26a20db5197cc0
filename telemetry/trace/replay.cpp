// Replay input extraction and the decision comparison (replay.hpp).
#include "telemetry/trace/replay.hpp"

#include "runtime/negotiation/message.hpp"

#include <algorithm>
#include <set>
#include <span>
#include <sstream>
#include <unordered_map>

namespace chorus::telemetry::trace {

namespace {
// Allgather and alltoall negotiate dim 0 as 0; the rank's own rows come from its enqueue record.
bool gathers(const tensor_spec& s) { return s.kind == collective_kind::allgather || s.kind == collective_kind::alltoall; }
}  // namespace

result<replay_input> replay_input_from(const std::vector<trace_file>& files) {
  replay_input in;
  in.size = static_cast<int>(files.size());
  in.cycles = UINT64_MAX;
  for (const auto& f : files) {
    replay_rank rr;
    rr.rank = f.header.rank;
    if (f.lost)
      return status{errc::invalid_argument, "trace " + f.path + ": the recorder lost " + std::to_string(f.lost) +
                                                " records (its buffer was full); this trace cannot be replayed"};
    bool tuned = false;
    std::unordered_map<uint64_t, int64_t> rows;  // allgather / alltoall handle → first dim
    uint64_t last = 0;
    for (const auto& r : f.records) {
      switch (r.kind) {
        case record_kind::tunables:
          if (!tuned) rr.tuning = r.tuning;
          tuned = true;
          break;
        case record_kind::enqueue:
          if (gathers(r.spec)) rows[r.handle] = r.spec.shape.empty() ? 1 : r.spec.shape[0];
          break;
        case record_kind::ready: {
          replay_op op{r.cycle, r.handle, r.spec, 0};
          if (gathers(op.spec)) {
            auto it = rows.find(r.handle);
            op.first_dim = it == rows.end() ? 0 : it->second;
          }
          rr.ops.push_back(std::move(op));
          break;
        }
        case record_kind::gossip_sent: {
          // A window score travels in this rank's own contribution: its round-0 gossip.
          auto m = negotiation::decode_message(std::as_bytes(std::span(r.payload)));
          if (m && m->kind == negotiation::message_kind::gossip && m->round == 0 && m->from == rr.rank &&
              m->scored.test(static_cast<std::size_t>(rr.rank)))
            rr.scores[m->cycle] = {m->score_min, m->digests.empty() ? 0 : m->digests.front().digest};
          break;
        }
        case record_kind::autotune: rr.autotune.push_back(r.autotune); break;
        case record_kind::direct_path: rr.direct_max_bytes = static_cast<std::size_t>(r.bytes); break;
        case record_kind::cycle:
          rr.recorded.cycles.push_back(r.cycle);
          last = std::max(last, r.cycle);
          break;
        case record_kind::agreed: {
          auto& names = rr.recorded.agreed[r.cycle];
          names.insert(names.end(), r.names.begin(), r.names.end());
          break;
        }
        case record_kind::bucket:
          rr.recorded.buckets.push_back({r.bucket, r.cycle, r.sequence, static_cast<uint32_t>(r.count),
                                         static_cast<std::size_t>(r.bytes), r.in_place, r.text, r.names, r.algorithm});
          break;
        default: break;
      }
    }
    if (!tuned)
      return status{errc::invalid_argument, "trace " + f.path + ": no tunables record (fusion threshold, chunk "
                                                                  "size), so fusion cannot be replayed"};
    in.cycles = std::min(in.cycles, last);
    in.ranks.push_back(std::move(rr));
  }
  if (in.ranks.empty()) in.cycles = 0;
  return in;
}

namespace {

std::string list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out + "]";
}

std::string describe_bucket(const bucket_event& b) {
  std::ostringstream os;
  os << "{" << b.kind << " " << list(b.tensors) << ", " << b.bytes << " bytes, " << b.chunks << " chunks, first sequence "
     << b.first_sequence << (b.in_place ? ", in place" : "") << "}";
  return os.str();
}

// The algorithm is not compared: it follows the job's hosts and CHORUS_HIERARCHICAL, which
// replay (one process, local fabric) does not have; the decisions replayed are fusion's.
bool same_bucket(const bucket_event& a, const bucket_event& b) {
  return a.first_sequence == b.first_sequence && a.chunks == b.chunks && a.bytes == b.bytes &&
         a.in_place == b.in_place && a.kind == b.kind && a.tensors == b.tensors;
}

std::vector<bucket_event> buckets_of(const rank_decisions& d, uint64_t cycle) {
  std::vector<bucket_event> out;
  for (const auto& b : d.buckets)
    if (b.cycle == cycle) out.push_back(b);
  return out;
}

}  // namespace

std::string replay_verdict::text() const {
  if (match)
    return "replay matches: " + std::to_string(cycles) + " cycles, " + std::to_string(tensors) + " tensors" +
           (autotune_windows ? ", " + std::to_string(autotune_windows) + " autotune windows" : "");
  return "replay differs at " + difference;
}

replay_verdict compare(const replay_input& in, const std::vector<rank_decisions>& replayed) {
  replay_verdict v;
  auto differ = [&](uint64_t cycle, int rank, const std::string& what, const std::string& expected,
                    const std::string& got) {
    v.difference = "cycle " + std::to_string(cycle) + ", rank " + std::to_string(rank) + ": " + what + ": expected " +
                   expected + ", got " + got;
    return v;
  };
  if (replayed.size() != in.ranks.size()) {
    v.difference = "cycle 0: " + std::to_string(replayed.size()) + " ranks replayed, " +
                   std::to_string(in.ranks.size()) + " recorded";
    return v;
  }
  static const std::vector<std::string> none;
  for (uint64_t c = 1; c <= in.cycles; ++c) {
    for (std::size_t r = 0; r < in.ranks.size(); ++r) {
      const auto& want = in.ranks[r].recorded;
      const auto& got = replayed[r];
      int rank = in.ranks[r].rank;
      bool ran_want = std::find(want.cycles.begin(), want.cycles.end(), c) != want.cycles.end();
      bool ran_got = std::find(got.cycles.begin(), got.cycles.end(), c) != got.cycles.end();
      if (ran_want != ran_got)
        return differ(c, rank, "the cycle", ran_want ? "to run" : "no cycle",
                      ran_got ? "it ran" : "no cycle (no rank had anything new for it)");
      auto wa = want.agreed.find(c);
      auto ga = got.agreed.find(c);
      const auto& we = wa == want.agreed.end() ? none : wa->second;
      const auto& ge = ga == got.agreed.end() ? none : ga->second;
      if (we != ge) return differ(c, rank, "agreed batch", list(we), list(ge));
      auto wb = buckets_of(want, c), gb = buckets_of(got, c);
      for (std::size_t i = 0; i < std::max(wb.size(), gb.size()); ++i) {
        std::string what = "bucket " + std::to_string(i + 1) + " of the cycle";
        if (i >= wb.size()) return differ(c, rank, what, "none", describe_bucket(gb[i]));
        if (i >= gb.size()) return differ(c, rank, what, describe_bucket(wb[i]), "none");
        if (!same_bucket(wb[i], gb[i])) return differ(c, rank, what, describe_bucket(wb[i]), describe_bucket(gb[i]));
      }
    }
    if (auto it = in.ranks.front().recorded.agreed.find(c); it != in.ranks.front().recorded.agreed.end())
      v.tensors += it->second.size();
  }
  // The autotuner: every rank computed the same thing from the same agreed scores.
  const auto& ref = in.ranks.front().autotune;
  for (std::size_t r = 1; r < in.ranks.size(); ++r) {
    const auto& mine = in.ranks[r].autotune;
    for (std::size_t i = 0; i < std::min(ref.size(), mine.size()); ++i) {
      const auto &a = ref[i], &b = mine[i];
      auto text = [](const autotune_event& e) {
        std::ostringstream os;
        os << "{window " << e.window << " cycle " << e.cycle << " score " << e.score << (e.switched ? " switched" : "")
           << " streams " << e.in_force.streams << " chunk " << e.in_force.chunk_bytes << " fusion "
           << e.in_force.fusion_threshold << " digest " << e.digest << "}";
        return os.str();
      };
      if (a.window != b.window || a.cycle != b.cycle || a.score != b.score || a.switched != b.switched ||
          a.digest != b.digest || a.in_force.chunk_bytes != b.in_force.chunk_bytes ||
          a.in_force.fusion_threshold != b.in_force.fusion_threshold || a.in_force.streams != b.in_force.streams ||
          a.in_force.in_place_bytes != b.in_force.in_place_bytes || a.in_force.cycle_time != b.in_force.cycle_time)
        return differ(a.cycle, in.ranks[r].rank, "autotune window " + std::to_string(a.window) + " (as rank " +
                                                     std::to_string(in.ranks.front().rank) + ")",
                      text(a), text(b));
    }
  }
  v.match = true;
  v.cycles = in.cycles;
  v.autotune_windows = ref.size();
  return v;
}

}  // namespace chorus::telemetry::trace
