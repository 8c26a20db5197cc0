// traffic_collector: per-stream byte counters and throughput, computed when Prometheus scrapes.
#include "telemetry/metrics/traffic_collector.hpp"

#include <utility>

#include "telemetry/metrics/names.hpp"

namespace chorus::telemetry {

namespace {

prometheus::ClientMetric series(const std::string& rank, int stream, double value, bool counter,
                                const char* direction = nullptr, int peer = -1) {
  prometheus::ClientMetric m;
  if (direction) m.label.push_back({"direction", direction});
  if (peer >= 0) m.label.push_back({"peer", std::to_string(peer)});
  m.label.push_back({"rank", rank});
  m.label.push_back({"stream", std::to_string(stream)});
  if (counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  return m;
}

prometheus::MetricFamily counter(const std::string& name, const std::string& help) {
  return {name, help, prometheus::MetricType::Counter, {}};
}

prometheus::MetricFamily gauge(const std::string& name, const std::string& help) {
  return {name, help, prometheus::MetricType::Gauge, {}};
}

}  // namespace

// Bytes per second from `r` to `c` over `seconds` (0 when the counter did not advance).
double per_second(uint64_t c, uint64_t r, double seconds) {
  return seconds > 0 && c >= r ? static_cast<double>(c - r) / seconds : 0.0;
}

namespace {

// The byte counters and the throughput of one level: a stream, or a stream's connection to a peer.
struct traffic_families {
  prometheus::MetricFamily sent, received, rate;

  // The series of `stream` (and `peer`, when >= 0): counters at `c`, rates since `r`.
  void add(const std::string& rank, int stream, const stream_traffic& c, const stream_traffic& r, double seconds,
           int peer = -1) {
    sent.metric.push_back(series(rank, stream, static_cast<double>(c.sent), true, nullptr, peer));
    received.metric.push_back(series(rank, stream, static_cast<double>(c.received), true, nullptr, peer));
    rate.metric.push_back(series(rank, stream, per_second(c.sent, r.sent, seconds), false, "sent", peer));
    rate.metric.push_back(series(rank, stream, per_second(c.received, r.received, seconds), false, "received", peer));
  }
};

}  // namespace

traffic_collector::traffic_collector(const context& ctx, std::chrono::milliseconds window)
    : rank_(std::to_string(ctx.rank)),
      rank_index_(ctx.rank),
      size_(ctx.size),
      streams_(ctx.streams),
      read_(ctx.traffic),
      read_peer_(ctx.peer_traffic),
      ports_(ctx.ports),
      mailbox_(ctx.mailbox_sent),
      window_(window) {
  history_.push_back(read_all(clock::now()));
}

traffic_collector::sample traffic_collector::read_all(clock::time_point now) const {
  sample s{now, std::vector<stream_traffic>(static_cast<std::size_t>(streams_)), {}};
  if (read_)
    for (int i = 0; i < streams_; ++i) s.per_stream[static_cast<std::size_t>(i)] = read_(i);
  if (read_peer_) {
    s.per_peer.resize(static_cast<std::size_t>(streams_) * static_cast<std::size_t>(size_));
    for (int i = 0; i < streams_; ++i)
      for (int p = 0; p < size_; ++p)
        if (p != rank_index_) s.per_peer[static_cast<std::size_t>(i * size_ + p)] = read_peer_(i, p);
  }
  return s;
}

void traffic_collector::collect_peers(const sample& cur, const sample& ref, double seconds,
                                      std::vector<prometheus::MetricFamily>& out) const {
  traffic_families f{
      counter(metric_names::stream_peer_sent_bytes,
              "Bytes the stream's connection to the peer carried from this rank (headers included)"),
      counter(metric_names::stream_peer_received_bytes, "Bytes this rank read from the stream's connection to the peer"),
      gauge(metric_names::stream_peer_throughput,
            "Bytes per second on the stream's connection to the peer over the latest window")};
  auto info = gauge(metric_names::stream_peer_connection,
                    "1 for each of the stream's connections to a peer; labels local_port and "
                    "remote_port name it for ss(8) and tc(8)");
  for (int i = 0; i < streams_; ++i)
    for (int p = 0; p < size_; ++p) {
      if (p == rank_index_) continue;
      const auto k = static_cast<std::size_t>(i * size_ + p);
      f.add(rank_, i, cur.per_peer[k], ref.per_peer[k], seconds, p);
      if (!ports_) continue;
      auto [local, remote] = ports_(i, p);
      auto m = series(rank_, i, 1.0, false, nullptr, p);
      m.label.push_back({"local_port", std::to_string(local)});
      m.label.push_back({"remote_port", std::to_string(remote)});
      info.metric.push_back(std::move(m));
    }
  out.push_back(std::move(f.sent));
  out.push_back(std::move(f.received));
  out.push_back(std::move(f.rate));
  if (!info.metric.empty()) out.push_back(std::move(info));
}

std::vector<prometheus::MetricFamily> traffic_collector::Collect() const { return collect_at(clock::now()); }

std::vector<prometheus::MetricFamily> traffic_collector::collect_at(clock::time_point now) const {
  std::lock_guard lock(mu_);
  sample cur = read_all(now);
  // The reference: the newest sample at least `window` old; the oldest one if none is.
  while (history_.size() > 1 && history_[1].at <= now - window_) history_.pop_front();
  const sample& ref = history_.front();
  double seconds = std::chrono::duration<double>(now - ref.at).count();

  traffic_families f{counter(metric_names::stream_sent_bytes,
                             "Bytes the stream sent to all peers (frame headers included, and payloads "
                             "through shared-memory rings)"),
                     counter(metric_names::stream_received_bytes,
                             "Bytes read from the stream's connections (all peers, headers included)"),
                     gauge(metric_names::stream_throughput,
                           "Bytes per second on the stream over the latest window of at least 1 s")};
  auto shm = counter(metric_names::stream_shm_sent_bytes,
                     "Payload bytes the stream sent through shared-memory rings to ranks on this host");
  for (int i = 0; i < streams_; ++i) {
    const auto& c = cur.per_stream[static_cast<std::size_t>(i)];
    f.add(rank_, i, c, ref.per_stream[static_cast<std::size_t>(i)], seconds);
    shm.metric.push_back(series(rank_, i, static_cast<double>(c.shm_sent), true));
  }
  std::vector<prometheus::MetricFamily> out{std::move(f.sent), std::move(f.received), std::move(shm),
                                            std::move(f.rate)};
  if (!cur.per_peer.empty() && ref.per_peer.size() == cur.per_peer.size()) collect_peers(cur, ref, seconds, out);
  if (mailbox_) {
    // The mailboxes are no stream's: one series per use (context::mailbox_sent).
    auto mail = counter(metric_names::mailbox_sent_bytes,
                        "Payload bytes this rank posted to its peers through shared-memory mailboxes "
                        "(label path: caller = blocking allreduces on the calling thread, pipeline = "
                        "the pipeline's direct path); no stream counts them");
    for (int u = 0; u < shm::mailbox_uses; ++u) {
      const auto use = static_cast<shm::mailbox_use>(u);
      prometheus::ClientMetric m;
      m.label.push_back({"path", shm::name_of(use)});
      m.label.push_back({"rank", rank_});
      m.counter.value = static_cast<double>(mailbox_(use));
      mail.metric.push_back(std::move(m));
    }
    out.push_back(std::move(mail));
  }
  if (now > history_.back().at) history_.push_back(std::move(cur));
  return out;
}

}  // namespace chorus::telemetry
