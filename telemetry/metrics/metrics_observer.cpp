// metrics_observer: events → pre-created Prometheus series; the endpoint; metrics_from_config.
#include "telemetry/metrics/metrics_observer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>

#include "runtime/core/log.hpp"
#include "telemetry/metrics/names.hpp"

namespace chorus::telemetry {

namespace {

using prometheus::Histogram;

/// start, start*factor, ... (count bounds).
Histogram::BucketBoundaries exponential(double start, double factor, int count) {
  Histogram::BucketBoundaries b;
  for (double v = start; count-- > 0; v *= factor) b.push_back(v);
  return b;
}

// 10 µs .. 1.3 s: negotiation is ~100 µs per cycle when healthy, seconds when a rank lags.
const Histogram::BucketBoundaries negotiation_buckets = exponential(10e-6, 2, 18);
// 50 µs .. 6.5 s: a small op is ~100 µs end to end, a large bucket tens of ms.
const Histogram::BucketBoundaries op_buckets = exponential(50e-6, 2, 18);
// torch.distributed's calls: from a microsecond (small allreduces on one host) to minutes.
const Histogram::BucketBoundaries call_buckets = exponential(1e-6, 4, 14);
// 1 KiB .. 256 MiB.
const Histogram::BucketBoundaries bucket_byte_buckets = exponential(1024, 4, 10);

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

/// Opens and closes one TCP connection to address:port (a wildcard address: loopback).
void knock(const std::string& address, int port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    if (v4->sin_addr.s_addr == htonl(INADDR_ANY)) v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v4;
  } else if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    if (std::memcmp(&v6->sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) v6->sin6_addr = in6addr_loopback;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v6;
  } else {
    return;
  }
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  ::close(fd);
}

}  // namespace

metrics_observer::metrics_observer(const context& ctx, std::chrono::milliseconds throughput_window)
    : rank_(std::to_string(ctx.rank)),
      registry_(std::make_shared<prometheus::Registry>()),
      traffic_(std::make_shared<traffic_collector>(ctx, throughput_window)) {
  namespace n = metric_names;
  const std::map<std::string, std::string> rank_label{{"rank", rank_}};
  auto counter = [&](const char* name, const char* help) -> prometheus::Family<prometheus::Counter>& {
    return prometheus::BuildCounter().Name(name).Help(help).Labels(rank_label).Register(*registry_);
  };
  auto gauge = [&](const char* name, const char* help) -> prometheus::Gauge& {
    return prometheus::BuildGauge().Name(name).Help(help).Labels(rank_label).Register(*registry_).Add({});
  };
  auto histogram = [&](const char* name, const char* help) -> prometheus::Family<Histogram>& {
    return prometheus::BuildHistogram().Name(name).Help(help).Labels(rank_label).Register(*registry_);
  };

  chunks_family_ = &counter(n::stream_chunks, "Chunks the stream's sender finished");
  steals_family_ = &counter(n::stream_steals, "Chunks the stream's sender stole from another stream");
  for (int s = 0; s < ctx.streams; ++s) {
    std::map<std::string, std::string> l{{"stream", std::to_string(s)}};
    streams_.push_back({&chunks_family_->Add(l), &steals_family_->Add(l)});
  }

  negotiation_latency_ = &histogram(n::negotiation_latency, "Seconds from an op's enqueue to the cycle that agreed it")
                              .Add({}, negotiation_buckets);
  cycle_duration_ = &histogram(n::cycle_duration, "Seconds one negotiation cycle took").Add({}, negotiation_buckets);
  gossip_sent_ = &counter(n::gossip_sent, "Gossip messages sent to peers").Add({});
  gossip_received_ = &counter(n::gossip_received, "Gossip messages received from peers").Add({});
  stalled_ = &gauge(n::stalled_tensors, "Tensors named in a stall warning and not agreed or ended since");
  stall_warnings_ = &counter(n::stall_warnings, "Stall warnings, one per tensor and warning").Add({});
  bucket_bytes_ = &histogram(n::bucket_bytes, "Payload bytes per fusion bucket").Add({}, bucket_byte_buckets);
  buckets_family_ = &counter(n::buckets, "Fusion buckets by the algorithm that reduced them");

  auto& enqueued = counter(n::ops_enqueued, "Operations handed to the pipeline");
  auto& latency = histogram(n::op_latency, "Seconds from an op's enqueue to its callback");
  for (int k = 0; k < op_kinds; ++k) {
    std::map<std::string, std::string> l{{"op", std::string(name_of(static_cast<collective_kind>(k)))}};
    ops_enqueued_[static_cast<std::size_t>(k)] = &enqueued.Add(l);
    op_latency_[static_cast<std::size_t>(k)] = &latency.Add(l, op_buckets);
  }

  auto& calls = counter(n::c10d_calls_total, "Calls of torch.distributed's Chorus groups that ended");
  auto& call_latency = histogram(n::c10d_call_latency, "Seconds from a torch.distributed call to its end");
  auto& call_bytes = counter(n::c10d_bytes, "Bytes of torch.distributed calls' tensors");
  for (const char* c : n::c10d_calls)
    calls_.push_back({c, &calls.Add({{"call", c}, {"result", "ok"}}), &calls.Add({{"call", c}, {"result", "error"}}),
                      &call_latency.Add({{"call", c}}, call_buckets), &call_bytes.Add({{"call", c}})});

  errors_family_ = &counter(n::errors, "Errors that ended operations, by kind");
  for (int c = 1; c <= static_cast<int>(errc::internal); ++c) {
    std::string kind = to_string(static_cast<errc>(c));
    errors_.emplace_back(kind, &errors_family_->Add({{"kind", kind}}));
  }

  auto& nonfinite = counter(n::nonfinite, "Buckets whose NaN/Inf check found non-finite input, by mode");
  nonfinite_error_ = &nonfinite.Add({{"mode", "error"}});
  nonfinite_skip_ = &nonfinite.Add({{"mode", "skip"}});
  auto& compressed = counter(n::compressed_bytes, "Bytes of compressed chunks: the caller's (input), on the wire (wire)");
  compressed_input_ = &compressed.Add({{"side", "input"}});
  compressed_wire_ = &compressed.Add({{"side", "wire"}});
  gauge(n::compression_off_on_shm,
        "1: ops among all ranks asking for fp16/bf16 run uncompressed, every peer sharing memory (CHORUS_COMPRESSION_SHM)")
      .Set(ctx.compression_off_on_shm ? 1 : 0);

  fusion_threshold_ = &gauge(n::tunable_fusion_threshold, "Fusion threshold in force (bytes)");
  chunk_bytes_ = &gauge(n::tunable_chunk_bytes, "Chunk size in force (bytes)");
  streams_gauge_ = &gauge(n::tunable_streams, "Streams in force");
  cycle_time_ = &gauge(n::tunable_cycle_time, "Cycle time in force (seconds)");
  in_place_ = &gauge(n::tunable_in_place, "Allreduce tensors this large are reduced in place (bytes; 0: none)");
  autotune_score_ = &gauge(n::autotune_score, "Autotuner: the job's score of the last agreed window (bytes/s)");
  autotune_samples_ = &counter(n::autotune_samples, "Autotuner: samples taken (median of several windows)").Add({});
  autotune_switches_ = &counter(n::autotune_switches, "Autotuner: switches of the tunables").Add({});
}

metrics_observer::~metrics_observer() {
  if (!exposer_) return;
  // civetweb's listener notices the stop only when its poll() returns: after up to 2 s, or at
  // once when a connection arrives. Knock until it has stopped, so shutdown is not held up.
  std::atomic<bool> stopped{false};
  std::thread knocker([&] {
    while (!stopped.load()) {
      knock(address_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  exposer_.reset();
  stopped = true;
  knocker.join();
}

result<int> metrics_observer::serve(const std::string& address, int port) {
  if (exposer_) return status{errc::internal, "metrics: serve() called twice"};
  std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  std::string where = host + ":" + std::to_string(port);
  try {
    // One civetweb thread is plenty for a scrape every few seconds.
    exposer_ = std::make_unique<prometheus::Exposer>(where, 1);
  } catch (const std::exception& e) {
    return status{errc::config, "cannot listen on " + where + " (" + e.what() + ")"};
  }
  auto ports = exposer_->GetListeningPorts();
  if (ports.empty()) {
    exposer_.reset();
    return status{errc::config, "cannot listen on " + where};
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(traffic_);
  address_ = address;
  port_ = ports.front();
  return port_;
}

std::vector<prometheus::MetricFamily> metrics_observer::collect() const {
  auto families = registry_->Collect();
  for (auto& f : traffic_->Collect()) families.push_back(std::move(f));
  return families;
}

std::string metrics_observer::scrape_text() const { return prometheus::TextSerializer().Serialize(collect()); }

// ---- events ----

void metrics_observer::on_enqueue(uint64_t, const tensor_spec& spec, time_point) {
  auto k = static_cast<std::size_t>(spec.kind);
  if (k < ops_enqueued_.size()) ops_enqueued_[k]->Increment();
}

void metrics_observer::on_callback(uint64_t, const tensor_spec& spec, const status&, time_point enqueued,
                                   time_point at) {
  auto k = static_cast<std::size_t>(spec.kind);
  if (k < op_latency_.size()) op_latency_[k]->Observe(seconds(at - enqueued));
  if (stalled_count_.load(std::memory_order_relaxed) > 0) unstall(spec.name);
}

void metrics_observer::on_gossip_sent(int, std::span<const uint8_t>, time_point) { gossip_sent_->Increment(); }

void metrics_observer::on_gossip_received(std::span<const uint8_t>, time_point) { gossip_received_->Increment(); }

void metrics_observer::on_cycle(const cycle_event& c) { cycle_duration_->Observe(seconds(c.finished - c.started)); }

void metrics_observer::on_agreed(uint64_t, std::span<const std::string> names,
                                 std::span<const std::chrono::microseconds> latencies, time_point) {
  for (auto l : latencies) negotiation_latency_->Observe(static_cast<double>(l.count()) * 1e-6);
  if (stalled_count_.load(std::memory_order_relaxed) > 0)
    for (const auto& name : names) unstall(name);
}

void metrics_observer::on_stall(const std::string& name, std::span<const int>, time_point) {
  stall_warnings_->Increment();
  std::lock_guard lock(stall_mu_);
  if (stalled_names_.insert(name).second) {
    stalled_count_.store(static_cast<int>(stalled_names_.size()), std::memory_order_relaxed);
    stalled_->Set(static_cast<double>(stalled_names_.size()));
  }
}

void metrics_observer::unstall(const std::string& name) {
  std::lock_guard lock(stall_mu_);
  if (stalled_names_.erase(name)) {
    stalled_count_.store(static_cast<int>(stalled_names_.size()), std::memory_order_relaxed);
    stalled_->Set(static_cast<double>(stalled_names_.size()));
  }
}

void metrics_observer::on_bucket(const bucket_event& b, time_point) {
  bucket_bytes_->Observe(static_cast<double>(b.bytes));
  buckets_family_->Add({{"algorithm", b.algorithm.empty() ? b.kind : b.algorithm}}).Increment();
}

prometheus::Counter& metrics_observer::stream_counter(prometheus::Family<prometheus::Counter>& f,
                                                      std::vector<stream_series>& pre, int stream,
                                                      prometheus::Counter* stream_series::*which) {
  if (stream >= 0 && stream < static_cast<int>(pre.size())) return *(pre[static_cast<std::size_t>(stream)].*which);
  // A stream the context did not announce: the family's own lock finds or adds it (slow, rare).
  return f.Add({{"stream", std::to_string(stream)}});
}

void metrics_observer::on_chunk_end(int stream, uint64_t, std::size_t, const status&, time_point, time_point) {
  stream_counter(*chunks_family_, streams_, stream, &stream_series::chunks).Increment();
}

void metrics_observer::on_steal(int thief, int, uint64_t, time_point) {
  stream_counter(*steals_family_, streams_, thief, &stream_series::steals).Increment();
}

void metrics_observer::on_error(std::string_view kind, const status&, time_point) {
  for (auto& [name, c] : errors_)
    if (name == kind) {
      c->Increment();
      return;
    }
  errors_family_->Add({{"kind", std::string(kind)}}).Increment();
}

void metrics_observer::on_nonfinite(std::span<const std::string>, std::span<const int>, std::string_view mode,
                                    time_point) {
  (mode == "error" ? nonfinite_error_ : nonfinite_skip_)->Increment();
}

void metrics_observer::on_compressed(int, std::size_t raw_bytes, std::size_t wire_bytes, time_point) {
  compressed_input_->Increment(static_cast<double>(raw_bytes));
  compressed_wire_->Increment(static_cast<double>(wire_bytes));
}

void metrics_observer::on_call(const call_event& e, time_point at) {
  // A short list: finding the call's series by name costs a few comparisons.
  const call_series* c = &calls_.back();  // "other"
  for (const auto& k : calls_)
    if (k.call == e.call) {
      c = &k;
      break;
    }
  (e.result && !e.result->ok() ? c->failed : c->ok)->Increment();
  c->latency->Observe(seconds(at - e.started));
  c->bytes->Increment(static_cast<double>(e.bytes));
}

void metrics_observer::on_tunables(const tunables& t, time_point) {
  fusion_threshold_->Set(static_cast<double>(t.fusion_threshold));
  chunk_bytes_->Set(static_cast<double>(t.chunk_bytes));
  streams_gauge_->Set(t.streams);
  cycle_time_->Set(static_cast<double>(t.cycle_time.count()) * 1e-6);
  in_place_->Set(static_cast<double>(t.in_place_bytes));
}

void metrics_observer::on_autotune(const autotune_event& e, time_point) {
  autotune_score_->Set(e.score);
  if (e.sample) autotune_samples_->Increment();
  if (e.switched) autotune_switches_->Increment();
}

// ---- configuration ----

metrics_options metrics_options::from_config(const telemetry_config& c) {
  metrics_options o;
  o.address = c.metrics_address;
  o.base_port = c.metrics_port;
  return o;
}

result<std::shared_ptr<observer>> metrics_from_config(const context& ctx, const telemetry_config& c) {
  auto opts = metrics_options::from_config(c);
  if (opts.base_port == 0) return std::shared_ptr<observer>{};
  int port = opts.base_port + ctx.local_rank;
  if (port > 65535)
    return status{errc::config, "CHORUS_METRICS_PORT=" + std::to_string(opts.base_port) + " + local rank " +
                                    std::to_string(ctx.local_rank) + " is past port 65535"};
  auto m = std::make_shared<metrics_observer>(ctx);
  auto bound = m->serve(opts.address, port);
  if (!bound) {
    CHORUS_LOG(warn, "metrics", "no metrics endpoint on this rank: " << bound.error().message()
                                    << "; the job goes on without it (set CHORUS_METRICS_PORT to a free base "
                                       "port, or 0 to turn metrics off)");
    return std::shared_ptr<observer>{};
  }
  CHORUS_LOG(info, "metrics", "serving http://" << opts.address << ":" << *bound << "/metrics");
  return std::shared_ptr<observer>(std::move(m));
}

}  // namespace chorus::telemetry
