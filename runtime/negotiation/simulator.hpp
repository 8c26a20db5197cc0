// A deterministic in-process network for N negotiation strategies: a virtual clock, messages
// delivered after a latency drawn from a seeded generator (so, with a latency range, in a
// random but reproducible order), and timers fired at the times the strategies ask for.
// Single-threaded. The negotiation tests use it, and so can the scale simulator (N = 1024):
// only the wire is modelled, the strategies are the real ones.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/strategy.hpp"

namespace chorus::negotiation {

struct simulator_options {
  std::string strategy = "gossip";  ///< "gossip" or "central"
  negotiation_options negotiation;
  /// One-way latency of each message, uniform in [min_latency, max_latency].
  duration min_latency = std::chrono::microseconds(1);
  duration max_latency = std::chrono::microseconds(1);
  /// Time a rank is busy per message it receives or sends (a serial queue per rank), so a
  /// root that handles 2(N-1) messages per cycle pays for them. 0 = free.
  duration processing_time = duration::zero();
  uint64_t seed = 1;
  /// Pass every message through encode()/decode_message(), as the control plane would.
  bool through_codec = false;
};

/// Everything one rank's strategy produced, in order (the report lists from report_lists).
struct rank_record : report_lists {
  std::vector<id_assigned> assigned;
  std::vector<agreed_batch> batches;
  /// The names of each batch's ids, looked up in the rank's registry right after the call
  /// that reported the batch, as the negotiator actor does (parallel to `batches`).
  std::vector<std::vector<std::string>> batch_names;
  /// Batch ids whose lookup after the call named another tensor than the id stood for in the
  /// batch's cycle (an id handed out again too early): "cycle 7 id 3: 'b' but agreed as 'a'".
  /// Must stay empty.
  std::vector<std::string> stale_lookups;
  /// The most cycles one strategy call finished.
  std::size_t max_cycles_per_call = 0;
  std::optional<uint64_t> shutdown_cycle;
  std::vector<join_agreed> joins;
  std::optional<status> fatal;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  /// Encoded size of the messages sent: the sum and the largest (through_codec only).
  uint64_t bytes_sent = 0;
  std::size_t largest_message_bytes = 0;
};

class simulator {
 public:
  /// errc::config for size < 1 or an unknown strategy.
  static result<std::unique_ptr<simulator>> create(int size, const simulator_options& options);

  int size() const { return static_cast<int>(ranks_.size()); }
  time_point now() const { return now_; }

  /// Local events on one rank, at now().
  void enqueue(int rank, tensor_spec spec);
  void submit_score(int rank, double score, uint64_t digest = 0);
  void request_shutdown(int rank);
  void request_join(int rank);

  /// Delivers messages and fires timers in time order until no message is in flight and
  /// every rank is idle; false if that did not happen within `limit` of virtual time.
  bool run_until_idle(duration limit = std::chrono::seconds(10));
  /// Processes every event up to now() + d, then moves the clock there.
  void run_for(duration d);

  const rank_record& record(int rank) const { return records_[static_cast<std::size_t>(rank)]; }
  negotiation_strategy& strategy(int rank) { return *ranks_[static_cast<std::size_t>(rank)]; }
  uint64_t messages_in_flight() const { return in_flight_; }
  /// Messages sent by all ranks since the start.
  uint64_t messages_total() const { return total_sent_; }
  /// "" when every rank produced the same ids, batches, errors, warnings and fatal text;
  /// otherwise the first difference, e.g. "rank 3 batch 2: ids [4,5] but rank 0 has [4]".
  std::string divergence() const;

 private:
  enum class event_kind { arrival, drain, timer };
  struct event {
    time_point at;
    uint64_t seq = 0;
    int rank = -1;
    event_kind kind = event_kind::timer;
    std::unique_ptr<gossip_message> message;  // arrivals only; null for timers
    bool operator>(const event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  simulator(const simulator_options& options) : options_(options), rng_(options.seed) {}
  /// `received`: the call handled a message, which costs processing_time before any send.
  void apply(int rank, actions a, bool received = false);
  void push(event e);
  event pop();
  void process(event e);
  void handle(int rank, std::unique_ptr<gossip_message> m);
  bool all_idle() const;

  simulator_options options_;
  std::vector<std::unique_ptr<negotiation_strategy>> ranks_;
  std::vector<rank_record> records_;
  std::vector<std::optional<time_point>> wake_;
  // Per rank: the name each id stands for, replayed from `assigned` cycle by cycle.
  std::vector<std::vector<std::string>> id_names_;
  std::vector<time_point> busy_until_;
  // Messages (and, as null, timers) waiting while the rank is busy, in arrival order.
  std::vector<std::deque<std::unique_ptr<gossip_message>>> inbox_;
  std::vector<event> events_;  // a min-heap on (at, seq)
  std::mt19937_64 rng_;
  time_point now_{};
  uint64_t seq_ = 0;
  uint64_t in_flight_ = 0;
  uint64_t total_sent_ = 0;
};

}  // namespace chorus::negotiation
