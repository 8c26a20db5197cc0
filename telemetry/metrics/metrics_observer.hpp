// metrics_observer: the Prometheus side of telemetry. It turns the actors' events into the
// series of telemetry/metrics/names.hpp and, when served, exposes them on one HTTP endpoint per
// rank (prometheus-cpp pull, civetweb threads: scrapes never run on an actor's thread).
//
// Hot path: every series (each stream, op kind and error kind) is created at construction, so
// an event costs one atomic add or one histogram observe on an object no other stream touches.
// Per-stream bytes come from the data plane's own counters, read at scrape time
// (traffic_collector). Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "runtime/core/status.hpp"
#include "telemetry/metrics/traffic_collector.hpp"
#include "telemetry/observer.hpp"
#include "telemetry/setup.hpp"

namespace prometheus {
class Exposer;
}

namespace chorus::telemetry {

/// Where a rank serves its metrics.
struct metrics_options {
  /// CHORUS_METRICS_ADDR: the address the endpoint listens on.
  std::string address = "127.0.0.1";
  /// CHORUS_METRICS_PORT: the base port; local rank r listens on base + r; 0 = metrics off.
  int base_port = 9400;
  /// The configured values of the variables above (runtime/config).
  static metrics_options from_config(const telemetry_config& c);
};

class metrics_observer final : public observer {
 public:
  /// Creates every series for `ctx` (rank label, ctx.streams streams). ctx.traffic, when set,
  /// must stay callable while this observer lives (it is read at every scrape).
  explicit metrics_observer(const context& ctx,
                            std::chrono::milliseconds throughput_window = std::chrono::seconds(1));
  ~metrics_observer() override;
  metrics_observer(const metrics_observer&) = delete;
  metrics_observer& operator=(const metrics_observer&) = delete;

  /// Serves GET /metrics on address:port (port 0: any free port). Returns the bound port, or
  /// the error (e.g. the port is in use) with nothing served. At most one call.
  result<int> serve(const std::string& address, int port);

  /// Everything a scrape sees now.
  std::vector<prometheus::MetricFamily> collect() const;
  /// collect() in Prometheus' text format.
  std::string scrape_text() const;

  void on_enqueue(uint64_t handle, const tensor_spec& spec, time_point at) override;
  void on_callback(uint64_t handle, const tensor_spec& spec, const status& result, time_point enqueued,
                   time_point at) override;
  void on_gossip_sent(int to, std::span<const uint8_t> bytes, time_point at) override;
  void on_gossip_received(std::span<const uint8_t> bytes, time_point at) override;
  void on_cycle(const cycle_event& c) override;
  void on_agreed(uint64_t cycle, std::span<const std::string> names,
                 std::span<const std::chrono::microseconds> latencies, time_point at) override;
  void on_stall(const std::string& name, std::span<const int> missing_ranks, time_point at) override;
  void on_bucket(const bucket_event& b, time_point at) override;
  void on_chunk_end(int stream, uint64_t sequence, std::size_t bytes, const status& result, time_point started,
                    time_point at) override;
  void on_steal(int thief, int victim, uint64_t sequence, time_point at) override;
  void on_error(std::string_view kind, const status& error, time_point at) override;
  void on_nonfinite(std::span<const std::string> tensors, std::span<const int> ranks, std::string_view mode,
                    time_point at) override;
  void on_compressed(int stream, std::size_t raw_bytes, std::size_t wire_bytes, time_point at) override;
  void on_call(const call_event& e, time_point at) override;
  void on_tunables(const tunables& t, time_point at) override;
  void on_autotune(const autotune_event& e, time_point at) override;

 private:
  /// The series of one stream; only that stream's sender updates them.
  struct stream_series {
    prometheus::Counter* chunks;
    prometheus::Counter* steals;
  };
  prometheus::Counter& stream_counter(prometheus::Family<prometheus::Counter>& f,
                                      std::vector<stream_series>& pre, int stream,
                                      prometheus::Counter* stream_series::*which);
  void unstall(const std::string& name);

  std::string rank_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<traffic_collector> traffic_;

  prometheus::Family<prometheus::Counter>* chunks_family_;
  prometheus::Family<prometheus::Counter>* steals_family_;
  std::vector<stream_series> streams_;

  prometheus::Histogram* negotiation_latency_;
  prometheus::Histogram* cycle_duration_;
  prometheus::Counter* gossip_sent_;
  prometheus::Counter* gossip_received_;
  prometheus::Gauge* stalled_;
  prometheus::Counter* stall_warnings_;
  prometheus::Histogram* bucket_bytes_;
  prometheus::Family<prometheus::Counter>* buckets_family_;  // label algorithm; Add() locks (once per bucket)

  static constexpr int op_kinds = collective_kind_count;
  std::array<prometheus::Counter*, op_kinds> ops_enqueued_{};
  std::array<prometheus::Histogram*, op_kinds> op_latency_{};

  prometheus::Family<prometheus::Counter>* errors_family_;
  std::vector<std::pair<std::string, prometheus::Counter*>> errors_;  // one per errc, fixed
  prometheus::Counter* nonfinite_error_;
  prometheus::Counter* nonfinite_skip_;
  prometheus::Counter* compressed_input_;
  prometheus::Counter* compressed_wire_;

  /// The series of one torch.distributed call kind (metric_names::c10d_calls).
  struct call_series {
    std::string_view call;
    prometheus::Counter* ok;
    prometheus::Counter* failed;
    prometheus::Histogram* latency;
    prometheus::Counter* bytes;
  };
  std::vector<call_series> calls_;

  prometheus::Gauge* fusion_threshold_;
  prometheus::Gauge* chunk_bytes_;
  prometheus::Gauge* streams_gauge_;
  prometheus::Gauge* cycle_time_;
  prometheus::Gauge* in_place_;
  prometheus::Gauge* autotune_score_;
  prometheus::Counter* autotune_samples_;
  prometheus::Counter* autotune_switches_;

  // Stalled names: touched by stall warnings (rare) and, only while one is stalled, by the
  // agreements and callbacks that end it.
  std::atomic<int> stalled_count_{0};
  std::mutex stall_mu_;
  std::unordered_set<std::string> stalled_names_;

  std::string address_;  // where exposer_ listens
  int port_ = 0;
  std::unique_ptr<prometheus::Exposer> exposer_;  // last: stops serving before the rest goes
};

/// The metrics part of observer_from_config: null when CHORUS_METRICS_PORT=0, or (after one
/// warning, the job goes on) when the endpoint cannot be served, e.g. its port is in use.
/// errc::config when the base port + local rank is past 65535.
result<std::shared_ptr<observer>> metrics_from_config(const context& ctx, const telemetry_config& c);

}  // namespace chorus::telemetry
