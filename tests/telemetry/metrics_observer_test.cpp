// metrics_observer: every series exists from the start, each event moves the series it should,
// the traffic collector's counters and throughput window, the HTTP endpoint, and the
// environment (port 0 = off, a busy port = no metrics and the job goes on, bad values).
#include "telemetry/metrics/metrics_observer.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "telemetry/metrics/names.hpp"
#include "tests/support/http_get.hpp"

namespace chorus::telemetry {
namespace {

using namespace std::chrono_literals;
namespace n = metric_names;

/// The series of `family` whose labels include all of `want`; nullopt when none matches.
std::optional<prometheus::ClientMetric> find(const std::vector<prometheus::MetricFamily>& fams,
                                             const std::string& family,
                                             const std::map<std::string, std::string>& want = {}) {
  for (const auto& f : fams) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      std::size_t hits = 0;
      for (const auto& l : m.label)
        if (auto it = want.find(l.name); it != want.end() && it->second == l.value) ++hits;
      if (hits == want.size()) return m;
    }
  }
  return std::nullopt;
}

context two_streams(std::function<stream_traffic(int)> traffic = {}) {
  context c;
  c.rank = 3;
  c.size = 4;
  c.local_rank = 1;
  c.streams = 2;
  c.traffic = std::move(traffic);
  return c;
}

tensor_spec spec_of(const std::string& name, collective_kind k) {
  tensor_spec s;
  s.name = name;
  s.kind = k;
  return s;
}

TEST(MetricsObserver, EverySeriesExistsFromTheStartWithTheRankLabel) {
  metrics_observer m(two_streams());
  auto text = m.scrape_text();
  for (const char* name :
       {n::stream_sent_bytes, n::stream_received_bytes, n::stream_shm_sent_bytes, n::stream_throughput,
        n::stream_chunks, n::stream_steals,
        n::negotiation_latency, n::cycle_duration, n::gossip_sent, n::gossip_received, n::stalled_tensors,
        n::stall_warnings, n::bucket_bytes, n::ops_enqueued, n::op_latency, n::errors, n::tunable_fusion_threshold,
        n::tunable_chunk_bytes, n::tunable_streams, n::tunable_cycle_time, n::tunable_in_place, n::autotune_score,
        n::autotune_samples, n::autotune_switches})
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  // Every sample line carries rank="3".
  std::size_t lines = 0;
  for (std::size_t p = 0; p < text.size();) {
    auto e = text.find('\n', p);
    std::string line = text.substr(p, e - p);
    p = e + 1;
    if (line.empty() || line[0] == '#') continue;
    ++lines;
    EXPECT_NE(line.find("rank=\"3\""), std::string::npos) << line;
  }
  EXPECT_GT(lines, 50u);
  auto fams = m.collect();
  for (const char* s : {"0", "1"}) {
    EXPECT_TRUE(find(fams, n::stream_chunks, {{"stream", s}}));
    EXPECT_TRUE(find(fams, n::stream_sent_bytes, {{"stream", s}}));
  }
  EXPECT_TRUE(find(fams, n::op_latency, {{"op", "allgather"}}));
  EXPECT_TRUE(find(fams, n::errors, {{"kind", "connection_lost"}}));
}

TEST(MetricsObserver, CompressionOffOnSharedMemoryIsAGaugeOfTheContext) {
  for (bool off : {false, true}) {
    auto ctx = two_streams();
    ctx.compression_off_on_shm = off;
    metrics_observer m(ctx);
    auto g = find(m.collect(), n::compression_off_on_shm, {});
    ASSERT_TRUE(g);
    EXPECT_EQ(g->gauge.value, off ? 1.0 : 0.0);
  }
}

TEST(MetricsObserver, EventsMoveTheirSeries) {
  metrics_observer m(two_streams());
  auto t0 = clock::now();
  m.on_enqueue(1, spec_of("a", collective_kind::allreduce), t0);
  m.on_enqueue(2, spec_of("b", collective_kind::broadcast), t0);
  m.on_callback(1, spec_of("a", collective_kind::allreduce), status{}, t0, t0 + 3ms);
  std::vector<std::string> names{"a", "b"};
  std::vector<std::chrono::microseconds> lat{250us, 750us};
  m.on_agreed(7, names, lat, t0);
  m.on_cycle({7, 1, 1, t0, t0 + 200us});
  std::vector<uint8_t> msg(10);
  m.on_gossip_sent(0, msg, t0);
  m.on_gossip_sent(1, msg, t0);
  m.on_gossip_received(msg, t0);
  bucket_event b;
  b.bytes = 5000;
  b.kind = "allreduce";
  b.algorithm = "hier_sharded";
  m.on_bucket(b, t0);
  m.on_chunk_end(1, 9, 4096, status{}, t0, t0);
  m.on_chunk_end(1, 10, 4096, status{}, t0, t0);
  m.on_chunk_end(0, 11, 4096, status{}, t0, t0);
  m.on_steal(0, 1, 10, t0);
  m.on_chunk_end(5, 12, 4096, status{}, t0, t0);  // a stream the context did not announce
  m.on_error("mismatch", status{errc::mismatch, "x"}, t0);
  m.on_error("something_new", status{errc::internal, "y"}, t0);
  m.on_tunables({64u << 20, 4u << 20, 2, 1500us, 1u << 20}, t0);

  auto f = m.collect();
  EXPECT_EQ(find(f, n::ops_enqueued, {{"op", "allreduce"}})->counter.value, 1);
  EXPECT_EQ(find(f, n::ops_enqueued, {{"op", "broadcast"}})->counter.value, 1);
  auto op = find(f, n::op_latency, {{"op", "allreduce"}})->histogram;
  EXPECT_EQ(op.sample_count, 1u);
  EXPECT_NEAR(op.sample_sum, 0.003, 1e-9);
  EXPECT_EQ(find(f, n::op_latency, {{"op", "broadcast"}})->histogram.sample_count, 0u);
  auto neg = find(f, n::negotiation_latency)->histogram;
  EXPECT_EQ(neg.sample_count, 2u);
  EXPECT_NEAR(neg.sample_sum, 0.001, 1e-9);
  // 250 µs lands at or below the 320 µs bound, 750 µs only from 1.28 ms on.
  for (const auto& bk : neg.bucket) {
    if (bk.upper_bound < 250e-6) EXPECT_EQ(bk.cumulative_count, 0u) << bk.upper_bound;
    if (bk.upper_bound >= 320e-6 && bk.upper_bound < 750e-6) EXPECT_EQ(bk.cumulative_count, 1u) << bk.upper_bound;
    if (bk.upper_bound >= 1.28e-3) EXPECT_EQ(bk.cumulative_count, 2u) << bk.upper_bound;
  }
  EXPECT_NEAR(find(f, n::cycle_duration)->histogram.sample_sum, 200e-6, 1e-9);
  EXPECT_EQ(find(f, n::gossip_sent)->counter.value, 2);
  EXPECT_EQ(find(f, n::gossip_received)->counter.value, 1);
  EXPECT_EQ(find(f, n::bucket_bytes)->histogram.sample_sum, 5000);
  EXPECT_EQ(find(f, n::buckets, {{"algorithm", "hier_sharded"}})->counter.value, 1);
  EXPECT_EQ(find(f, n::stream_chunks, {{"stream", "0"}})->counter.value, 1);
  EXPECT_EQ(find(f, n::stream_chunks, {{"stream", "1"}})->counter.value, 2);
  EXPECT_EQ(find(f, n::stream_chunks, {{"stream", "5"}})->counter.value, 1);
  EXPECT_EQ(find(f, n::stream_steals, {{"stream", "0"}})->counter.value, 1);
  EXPECT_EQ(find(f, n::stream_steals, {{"stream", "1"}})->counter.value, 0);
  EXPECT_EQ(find(f, n::errors, {{"kind", "mismatch"}})->counter.value, 1);
  EXPECT_EQ(find(f, n::errors, {{"kind", "something_new"}})->counter.value, 1);
  EXPECT_EQ(find(f, n::tunable_fusion_threshold)->gauge.value, 64 << 20);
  EXPECT_EQ(find(f, n::tunable_chunk_bytes)->gauge.value, 4 << 20);
  EXPECT_EQ(find(f, n::tunable_streams)->gauge.value, 2);
  EXPECT_NEAR(find(f, n::tunable_cycle_time)->gauge.value, 0.0015, 1e-12);
  EXPECT_EQ(find(f, n::tunable_in_place)->gauge.value, 1 << 20);
}

TEST(MetricsObserver, AutotuneWindowsMoveScoreSamplesAndSwitches) {
  metrics_observer m(two_streams());
  auto t0 = clock::now();
  autotune_event e;
  e.score = 2.5e9;
  m.on_autotune(e, t0);  // a window that ended no sample and switched nothing
  e.score = 1.5e9;
  e.sample = true;
  e.switched = true;
  m.on_autotune(e, t0);
  auto f = m.collect();
  EXPECT_EQ(find(f, n::autotune_score)->gauge.value, 1.5e9);
  EXPECT_EQ(find(f, n::autotune_samples)->counter.value, 1);
  EXPECT_EQ(find(f, n::autotune_switches)->counter.value, 1);
}

TEST(MetricsObserver, StalledTensorsCountUntilAgreedOrEnded) {
  metrics_observer m(two_streams());
  auto t = clock::now();
  std::vector<int> missing{1};
  m.on_stall("x", missing, t);
  m.on_stall("y", missing, t);
  m.on_stall("x", missing, t);  // a second warning for the same tensor
  auto f = m.collect();
  EXPECT_EQ(find(f, n::stalled_tensors)->gauge.value, 2);
  EXPECT_EQ(find(f, n::stall_warnings)->counter.value, 3);
  std::vector<std::string> agreed{"x", "z"};
  std::vector<std::chrono::microseconds> lat{5s, 1ms};
  m.on_agreed(3, agreed, lat, t);
  EXPECT_EQ(find(m.collect(), n::stalled_tensors)->gauge.value, 1);
  m.on_callback(9, spec_of("y", collective_kind::allreduce), status{errc::shutdown, "down"}, t, t);
  EXPECT_EQ(find(m.collect(), n::stalled_tensors)->gauge.value, 0);
}

TEST(TrafficCollector, CountersAreTheDataPlanesAndThroughputCoversTheLatestWindow) {
  std::array<std::atomic<uint64_t>, 2> sent{}, received{};
  auto read = [&](int s) {
    return stream_traffic{sent[static_cast<std::size_t>(s)].load(), received[static_cast<std::size_t>(s)].load(),
                          sent[static_cast<std::size_t>(s)].load() / 2};
  };
  auto start = traffic_collector::clock::now();
  context ctx;
  ctx.streams = 2;
  ctx.traffic = read;
  traffic_collector c(ctx, 1000ms);
  auto rate = [](const std::vector<prometheus::MetricFamily>& f, const char* stream, const char* dir) {
    return find(f, n::stream_throughput, {{"stream", stream}, {"direction", dir}})->gauge.value;
  };
  sent[0] = 2'000'000;
  received[1] = 500'000;
  auto f = c.collect_at(start + 2s);  // window: construction .. now
  EXPECT_EQ(find(f, n::stream_sent_bytes, {{"stream", "0"}})->counter.value, 2e6);
  EXPECT_EQ(find(f, n::stream_received_bytes, {{"stream", "1"}})->counter.value, 5e5);
  EXPECT_EQ(find(f, n::stream_shm_sent_bytes, {{"stream", "0"}})->counter.value, 1e6);
  EXPECT_NEAR(rate(f, "0", "sent"), 1e6, 1e3);
  EXPECT_NEAR(rate(f, "1", "received"), 2.5e5, 1e3);
  EXPECT_EQ(rate(f, "1", "sent"), 0);
  sent[0] = 2'300'000;
  f = c.collect_at(start + 2500ms);  // the previous scrape is only 0.5 s old: back to construction
  EXPECT_NEAR(rate(f, "0", "sent"), 2.3e6 / 2.5, 1e3);
  sent[0] = 3'300'000;
  f = c.collect_at(start + 4s);  // reference: the scrape at 2.5 s (the newest at least 1 s old)
  EXPECT_NEAR(rate(f, "0", "sent"), 1e6 / 1.5, 1e3);
  f = c.collect_at(start + 10s);  // idle since
  EXPECT_EQ(rate(f, "0", "sent"), 0);
  EXPECT_EQ(find(f, n::stream_sent_bytes, {{"stream", "0"}})->counter.value, 3.3e6);
}

TEST(TrafficCollector, WithoutAReaderEverythingIsZero) {
  context ctx;
  ctx.rank = 1;
  ctx.streams = 3;
  traffic_collector c(ctx, 1000ms);
  auto f = c.Collect();
  for (const char* s : {"0", "1", "2"}) EXPECT_EQ(find(f, n::stream_sent_bytes, {{"stream", s}})->counter.value, 0);
  EXPECT_FALSE(find(f, n::stream_peer_sent_bytes, {}));  // no per-peer reader: no per-peer series
}

TEST(TrafficCollector, MailboxBytesAreCountedByPathWhenThereIsAReader) {
  context ctx;
  ctx.rank = 2;
  ctx.streams = 1;
  {
    traffic_collector none(ctx, 1000ms);
    EXPECT_FALSE(find(none.Collect(), n::mailbox_sent_bytes, {}));  // no reader: no series
  }
  std::array<std::atomic<uint64_t>, 2> posted{};
  ctx.mailbox_sent = [&](shm::mailbox_use use) { return posted[static_cast<std::size_t>(use)].load(); };
  traffic_collector c(ctx, 1000ms);
  posted[0] = 4096;
  posted[1] = 64 << 20;
  auto f = c.Collect();
  EXPECT_EQ(find(f, n::mailbox_sent_bytes, {{"path", "caller"}, {"rank", "2"}})->counter.value, 4096);
  EXPECT_EQ(find(f, n::mailbox_sent_bytes, {{"path", "pipeline"}, {"rank", "2"}})->counter.value, 64 << 20);
  EXPECT_EQ(find(f, n::stream_sent_bytes, {{"stream", "0"}})->counter.value, 0);  // no stream's
}

TEST(TrafficCollector, PerPeerSeriesShowEachConnectionAndItsPorts) {
  // Rank 1 of 3, two streams: connections to peers 0 and 2; stream 1 to peer 2 is slow.
  std::map<std::pair<int, int>, std::atomic<uint64_t>> sent;
  for (int s : {0, 1})
    for (int p : {0, 2}) sent[{s, p}] = 0;
  context ctx;
  ctx.rank = 1;
  ctx.size = 3;
  ctx.streams = 2;
  ctx.peer_traffic = [&](int s, int p) { return stream_traffic{sent.at({s, p}).load(), 0, 0}; };
  ctx.ports = [](int s, int p) { return std::pair<int, int>{40000 + 10 * p + s, 29500 + p}; };
  auto start = traffic_collector::clock::now();
  traffic_collector c(ctx, 1000ms);
  sent[{0, 0}] = 4'000'000;
  sent[{1, 0}] = 4'000'000;
  sent[{0, 2}] = 4'000'000;
  sent[{1, 2}] = 1'000'000;
  auto f = c.collect_at(start + 2s);
  EXPECT_EQ(find(f, n::stream_peer_sent_bytes, {{"stream", "1"}, {"peer", "2"}})->counter.value, 1e6);
  EXPECT_EQ(find(f, n::stream_peer_sent_bytes, {{"stream", "0"}, {"peer", "2"}})->counter.value, 4e6);
  EXPECT_NEAR(find(f, n::stream_peer_throughput, {{"stream", "1"}, {"peer", "2"}, {"direction", "sent"}})->gauge.value,
              5e5, 1e3);
  EXPECT_FALSE(find(f, n::stream_peer_sent_bytes, {{"peer", "1"}}));  // never itself
  auto info = find(f, n::stream_peer_connection, {{"stream", "1"}, {"peer", "2"}});
  ASSERT_TRUE(info);
  EXPECT_EQ(info->gauge.value, 1);
  std::map<std::string, std::string> labels;
  for (const auto& l : info->label) labels[l.name] = l.value;
  EXPECT_EQ(labels["local_port"], "40021");
  EXPECT_EQ(labels["remote_port"], "29502");
}

TEST(MetricsObserver, StreamsCountConcurrentlyWithoutLosingUpdates) {
  metrics_observer m(two_streams());
  constexpr int per_stream = 20000;
  std::vector<std::thread> senders;
  for (int s = 0; s < 2; ++s)
    senders.emplace_back([&, s] {
      auto t = clock::now();
      for (int i = 0; i < per_stream; ++i) {
        m.on_chunk_end(s, static_cast<uint64_t>(i), 1, status{}, t, t);
        if (i % 100 == 0) m.on_steal(s, 1 - s, 0, t);
      }
    });
  std::thread scraper([&] {
    for (int i = 0; i < 20; ++i) (void)m.scrape_text();
  });
  for (auto& t : senders) t.join();
  scraper.join();
  auto f = m.collect();
  for (const char* s : {"0", "1"}) {
    EXPECT_EQ(find(f, n::stream_chunks, {{"stream", s}})->counter.value, per_stream);
    EXPECT_EQ(find(f, n::stream_steals, {{"stream", s}})->counter.value, per_stream / 100);
  }
}

TEST(MetricsObserver, ServesTheScrapeOverHttp) {
  uint64_t bytes = 12345;
  metrics_observer m(two_streams([&](int s) { return stream_traffic{bytes * static_cast<uint64_t>(s + 1), 0}; }));
  auto port = m.serve("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error().to_string();
  m.on_gossip_sent(1, {}, clock::now());
  auto r = testing::http_get("127.0.0.1", *port, "/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, 200);
  EXPECT_NE(r->body.find("chorus_stream_sent_bytes_total{rank=\"3\",stream=\"1\"} 24690"), std::string::npos)
      << r->body.substr(0, 2000);
  EXPECT_NE(r->body.find("chorus_gossip_messages_sent_total{rank=\"3\"} 1"), std::string::npos);
  EXPECT_FALSE(m.serve("127.0.0.1", 0));  // at most once
}

/// A port some other socket listens on for the duration of the test.
struct busy_port {
  int fd = -1;
  int port = 0;
  busy_port() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::listen(fd, 1);
    socklen_t len = sizeof sa;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~busy_port() { ::close(fd); }
};

telemetry_config port_of(std::string port) {
  auto c = read_config([&port](const char* name) -> const char* {
    return std::string_view(name) == "CHORUS_METRICS_PORT" ? port.c_str() : nullptr;
  });
  if (!c) throw std::runtime_error(c.error().to_string());
  return c->telemetry;
}

TEST(MetricsFromConfig, APortInUseMeansNoMetricsAndNoFailure) {
  busy_port busy;
  context c = two_streams();
  c.local_rank = 0;
  auto o = metrics_from_config(c, port_of(std::to_string(busy.port)));
  ASSERT_TRUE(o) << o.error().to_string();
  EXPECT_EQ(*o, nullptr);
  metrics_observer m(c);
  auto served = m.serve("127.0.0.1", busy.port);
  ASSERT_FALSE(served);
  EXPECT_NE(served.error().message().find(std::to_string(busy.port)), std::string::npos);
}

TEST(MetricsFromConfig, PortPlusLocalRankAndOff) {
  busy_port probe;  // a port that is free once closed: close it, then serve base + local rank there
  int base = probe.port - 1;
  ::close(probe.fd);
  probe.fd = -1;
  context c = two_streams();  // local rank 1
  auto o = metrics_from_config(c, port_of(std::to_string(base)));
  ASSERT_TRUE(o) << o.error().to_string();
  ASSERT_NE(*o, nullptr);
  auto r = testing::http_get("127.0.0.1", base + 1, "/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("chorus_tunable_streams{rank=\"3\"}"), std::string::npos);

  auto off = metrics_from_config(c, port_of("0"));
  ASSERT_TRUE(off);
  EXPECT_EQ(*off, nullptr);
}

TEST(MetricsFromConfig, BadValuesNameTheVariable) {
  for (const char* v : {"abc", "-1", "70000", "80x"}) {
    auto o = read_config([v](const char* name) -> const char* {
      return std::string_view(name) == "CHORUS_METRICS_PORT" ? v : nullptr;
    });
    ASSERT_FALSE(o) << v;
    EXPECT_EQ(o.error().code(), errc::config);
    EXPECT_NE(o.error().message().find("CHORUS_METRICS_PORT='" + std::string(v) + "'"), std::string::npos);
  }
  auto past = metrics_from_config(two_streams(), port_of("65535"));  // + local rank 1
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().message().find("65535"), std::string::npos);
}

TEST(MetricsFromConfig, DefaultIs9400PlusLocalRankOnLoopback) {
  auto o = metrics_options::from_config(port_of(""));
  EXPECT_EQ(o.base_port, 9400);
  EXPECT_EQ(o.address, "127.0.0.1");
  EXPECT_EQ(o.base_port, metrics_options{}.base_port);
  EXPECT_EQ(o.address, metrics_options{}.address);
}

}  // namespace
}  // namespace chorus::telemetry
