// The data plane's byte counters as Prometheus series, read at scrape time: bytes sent and
// received per stream and the part of those sent through shared-memory rings (counters), and
// each stream's throughput over a recent window (gauge); the same per stream and peer (one
// connection each), with the connection's ports, so that one slow connection shows.
// Reading at scrape time costs the data plane nothing beyond its relaxed per-connection counters.
// Thread-safety: Collect() may run on several scrape threads at once (one mutex, scrapes only).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "telemetry/setup.hpp"

namespace chorus::telemetry {

class traffic_collector final : public prometheus::Collectable {
 public:
  using clock = std::chrono::steady_clock;

  /// ctx.traffic (per stream), ctx.peer_traffic and ctx.ports (per stream and peer, peers in
  /// [0, ctx.size) other than ctx.rank) must stay callable while this object lives; an empty
  /// traffic reports zeros, an empty peer_traffic / ports leaves their series out. The
  /// ctx.mailbox_sent, when set, adds the mailboxes' counter. The
  /// throughput gauges cover the span since the newest earlier scrape at least `window` old
  /// (or since construction).
  traffic_collector(const context& ctx, std::chrono::milliseconds window);

  std::vector<prometheus::MetricFamily> Collect() const override;
  /// The same at a given time (tests drive the clock).
  std::vector<prometheus::MetricFamily> collect_at(clock::time_point now) const;

 private:
  struct sample {
    clock::time_point at;
    std::vector<stream_traffic> per_stream;
    std::vector<stream_traffic> per_peer;  ///< [stream * size + peer]; empty without peer_traffic
  };
  sample read_all(clock::time_point now) const;
  void collect_peers(const sample& cur, const sample& ref, double seconds,
                     std::vector<prometheus::MetricFamily>& out) const;

  std::string rank_;
  int rank_index_;
  int size_;
  int streams_;
  std::function<stream_traffic(int)> read_;
  std::function<stream_traffic(int, int)> read_peer_;
  std::function<std::pair<int, int>(int, int)> ports_;
  std::function<uint64_t(shm::mailbox_use)> mailbox_;
  std::chrono::milliseconds window_;
  mutable std::mutex mu_;
  mutable std::deque<sample> history_;  // oldest first; front is the reference of the next rate
};

}  // namespace chorus::telemetry
