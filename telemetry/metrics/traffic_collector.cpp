// traffic_collector: per-stream byte counters and throughput, computed when Prometheus scrapes.
#include "telemetry/metrics/traffic_collector.hpp"

#include <utility>

#include "telemetry/metrics/names.hpp"

namespace chorus::telemetry {

namespace {

prometheus::ClientMetric series(const std::string& rank, int stream, double value, bool counter,
                                const char* direction = nullptr) {
  prometheus::ClientMetric m;
  if (direction) m.label.push_back({"direction", direction});
  m.label.push_back({"rank", rank});
  m.label.push_back({"stream", std::to_string(stream)});
  if (counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  return m;
}

}  // namespace

traffic_collector::traffic_collector(int rank, int streams, std::function<stream_traffic(int)> read,
                                     std::chrono::milliseconds window)
    : rank_(std::to_string(rank)), streams_(streams), read_(std::move(read)), window_(window) {
  history_.push_back(read_all(clock::now()));
}

traffic_collector::sample traffic_collector::read_all(clock::time_point now) const {
  sample s{now, std::vector<stream_traffic>(static_cast<std::size_t>(streams_))};
  if (read_)
    for (int i = 0; i < streams_; ++i) s.per_stream[static_cast<std::size_t>(i)] = read_(i);
  return s;
}

std::vector<prometheus::MetricFamily> traffic_collector::Collect() const { return collect_at(clock::now()); }

std::vector<prometheus::MetricFamily> traffic_collector::collect_at(clock::time_point now) const {
  std::lock_guard lock(mu_);
  sample cur = read_all(now);
  // The reference: the newest sample at least `window` old; the oldest one if none is.
  while (history_.size() > 1 && history_[1].at <= now - window_) history_.pop_front();
  const sample& ref = history_.front();
  double seconds = std::chrono::duration<double>(now - ref.at).count();

  prometheus::MetricFamily sent{metric_names::stream_sent_bytes,
                                "Bytes the stream sent to all peers (frame headers included, and payloads "
                                "through shared-memory rings)",
                                prometheus::MetricType::Counter,
                                {}};
  prometheus::MetricFamily received{metric_names::stream_received_bytes,
                                    "Bytes read from the stream's connections (all peers, headers included)",
                                    prometheus::MetricType::Counter,
                                    {}};
  prometheus::MetricFamily shm{metric_names::stream_shm_sent_bytes,
                               "Payload bytes the stream sent through shared-memory rings to ranks on this host",
                               prometheus::MetricType::Counter,
                               {}};
  prometheus::MetricFamily rate{metric_names::stream_throughput,
                                "Bytes per second on the stream over the latest window of at least 1 s",
                                prometheus::MetricType::Gauge,
                                {}};
  for (int i = 0; i < streams_; ++i) {
    const auto& c = cur.per_stream[static_cast<std::size_t>(i)];
    const auto& r = ref.per_stream[static_cast<std::size_t>(i)];
    sent.metric.push_back(series(rank_, i, static_cast<double>(c.sent), true));
    received.metric.push_back(series(rank_, i, static_cast<double>(c.received), true));
    shm.metric.push_back(series(rank_, i, static_cast<double>(c.shm_sent), true));
    double up = seconds > 0 && c.sent >= r.sent ? static_cast<double>(c.sent - r.sent) / seconds : 0.0;
    double down =
        seconds > 0 && c.received >= r.received ? static_cast<double>(c.received - r.received) / seconds : 0.0;
    rate.metric.push_back(series(rank_, i, up, false, "sent"));
    rate.metric.push_back(series(rank_, i, down, false, "received"));
  }
  if (now > history_.back().at) history_.push_back(std::move(cur));
  return {std::move(sent), std::move(received), std::move(shm), std::move(rate)};
}

}  // namespace chorus::telemetry
