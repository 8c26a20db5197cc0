// Metrics of a real job: two ranks with two streams each (chorus-testrank pipeline-metrics),
// scraped by a real Prometheus server, which must hold per-stream byte counters of both streams
// (> 0: the data plane's bytes) and a negotiation histogram whose count matches the ops every
// rank ran; and every metric the Grafana dashboard (telemetry/grafana/chorus.json) queries is
// exposed by a running rank.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "tests/multiproc/local_job.hpp"
#include "tests/multiproc/prometheus_server.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/mini_json.hpp"

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

constexpr int steps = 4;
constexpr int ops_per_rank = steps * 6;  // see tests/multiproc/rank/pipeline_metrics.cpp

bool port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

/// A base port B with B and B+1 free (one metrics endpoint per local rank), taken below the
/// kernel's ephemeral range: a port from that range can be handed to one of the job's own
/// connections or listeners before the rank binds its endpoint.
int free_port_pair() {
  int ephemeral_low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> ephemeral_low;
  int lo = 10000, hi = ephemeral_low - 2;
  if (hi <= lo) return 0;
  std::random_device rd;
  std::uniform_int_distribution<int> pick(lo, hi);
  for (int i = 0; i < 200; ++i) {
    int p = pick(rd);
    if (port_free(p) && port_free(p + 1)) return p;
  }
  return 0;
}

std::string repo_file(const std::string& rel) {
  std::string here = __FILE__;  // <repo>/tests/multiproc/pipeline_metrics_test.cpp
  return here.substr(0, here.rfind("/tests/multiproc/")) + "/" + rel;
}

/// A 2-rank metrics job; the destructor lets the ranks finish (stop file) and checks they did.
/// By default the pipeline's chunks stay on the streams (the byte counters under test are the
/// data plane's), off the one-host direct path (mailboxes, no stream); `direct` keeps it on.
struct metrics_job {
  explicit metrics_job(bool direct = false)
      : job{2,
            {CHORUS_TESTRANK_PATH, "pipeline-metrics", std::to_string(steps), stop_file},
            {{"CHORUS_METRICS_PORT", std::to_string(base)},
             {"CHORUS_NUM_STREAMS", "2"},
             {"CHORUS_CALLER_ALLREDUCE_BYTES", direct ? "" : "0"}}} {}
  int base = free_port_pair();
  std::string stop_file = "/tmp/chorus-metrics-stop-" + random_hex(8);
  local_job job;

  bool ready() {
    for (int r = 0; r < 2; ++r)
      if (!job.wait_for_output(r, "pipeline-metrics ready", 60s)) return false;
    return true;
  }
  ~metrics_job() {
    std::ofstream(stop_file) << "stop\n";
    auto results = job.wait(30s);
    ::unlink(stop_file.c_str());
    for (auto& r : results) {
      EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << (r.timed_out ? " timed out" : "")
                                                << " exit " << r.exit_code << "\n" << r.output;
      EXPECT_NE(r.output.find("pipeline-metrics done"), std::string::npos) << r.output;
    }
  }
};

TEST(pipeline_metrics, a_real_prometheus_scrapes_both_streams_and_the_negotiation_histogram) {
  metrics_job j;
  ASSERT_NE(j.base, 0);
  ASSERT_TRUE(j.ready()) << j.job.output(0) << j.job.output(1);
  prometheus_server prom({"127.0.0.1:" + std::to_string(j.base), "127.0.0.1:" + std::to_string(j.base + 1)});
  // Both targets up before anything else (diagnostics name the one that is not).
  auto both_up = [](const json& res) {
    if (!res.is_array() || res.arr().size() != 2) return false;
    for (const auto& s : res.arr())
      if (sample_value(s) != 1) return false;
    return true;
  };
  auto up = prom.wait_for("up", both_up, 30s);
  ASSERT_TRUE(up && both_up(*up)) << "targets not up; rank logs:\n"
                                  << j.job.output(0) << j.job.output(1) << "prometheus:\n" << prom.log();

  // 1. Byte counters of both streams of both ranks, both directions.
  for (const char* name : {"chorus_stream_sent_bytes_total", "chorus_stream_received_bytes_total"}) {
    auto res = prom.query(name);
    ASSERT_TRUE(res && res->is_array()) << name << "\n" << prom.log();
    std::set<std::string> seen;
    for (const auto& s : res->arr()) {
      seen.insert(s["metric"]["rank"].str() + "/" + s["metric"]["stream"].str());
      EXPECT_GE(sample_value(s), 0) << name;
    }
    EXPECT_EQ(seen, (std::set<std::string>{"0/0", "0/1", "1/0", "1/1"})) << name;
  }

  // 2. The negotiation histogram: one observation per op on every rank, latencies > 0 and
  //    below the 30 s the rank waits for an op.
  auto counts_match = [](const json& res) {
    if (!res.is_array() || res.arr().size() != 2) return false;
    for (const auto& s : res.arr())
      if (sample_value(s) != ops_per_rank) return false;
    return true;
  };
  auto count = prom.wait_for("chorus_negotiation_latency_seconds_count", counts_match, 30s);
  ASSERT_TRUE(count && counts_match(*count)) << "expected " << ops_per_rank << " per rank\n" << prom.log();
  auto sum = prom.query("chorus_negotiation_latency_seconds_sum");
  ASSERT_TRUE(sum && sum->arr().size() == 2);
  for (const auto& s : sum->arr()) {
    EXPECT_GT(sample_value(s), 0);
    EXPECT_LT(sample_value(s) / ops_per_rank, 30.0);
  }
  auto p99 = prom.query("histogram_quantile(0.99, chorus_negotiation_latency_seconds_bucket)");
  ASSERT_TRUE(p99 && p99->arr().size() == 2);
  for (const auto& s : p99->arr()) {
    EXPECT_GT(sample_value(s), 0);
    EXPECT_LT(sample_value(s), 30.0);
  }
  // The largest bucket bound holds every observation (cumulative).
  auto inf = prom.query("chorus_negotiation_latency_seconds_bucket{le=\"+Inf\"}");
  ASSERT_TRUE(inf && inf->arr().size() == 2);
  for (const auto& s : inf->arr()) EXPECT_EQ(sample_value(s), ops_per_rank);

  // 3. Operation latency counts every allreduce once; the tunables in force were reported.
  auto op = prom.query("chorus_op_latency_seconds_count{op=\"allreduce\"}");
  ASSERT_TRUE(op && op->arr().size() == 2);
  for (const auto& s : op->arr()) EXPECT_EQ(sample_value(s), ops_per_rank);
  auto streams = prom.query("chorus_tunable_streams");
  ASSERT_TRUE(streams && streams->arr().size() == 2);
  for (const auto& s : streams->arr()) EXPECT_EQ(sample_value(s), 2);
}

// The byte counters come from the data plane (bindings/cpp/session.cpp wires the
// communicator's per-stream traffic into telemetry).
TEST(pipeline_metrics, per_stream_bytes_are_the_data_planes) {
  metrics_job j;
  ASSERT_NE(j.base, 0);
  ASSERT_TRUE(j.ready()) << j.job.output(0) << j.job.output(1);
  prometheus_server prom({"127.0.0.1:" + std::to_string(j.base), "127.0.0.1:" + std::to_string(j.base + 1)});
  auto all_positive = [](const json& res) {
    if (!res.is_array() || res.arr().size() != 4) return false;
    for (const auto& s : res.arr())
      if (sample_value(s) <= 0) return false;
    return true;
  };
  for (const char* name : {"chorus_stream_sent_bytes_total", "chorus_stream_received_bytes_total"}) {
    // Every stream carried chunks of the 16 MiB tensor: all four series > 0.
    auto res = prom.wait_for(name, all_positive, 30s);
    ASSERT_TRUE(res && all_positive(*res)) << name << ": " << (res ? "wrong series" : "no answer") << "\n"
                                           << prom.log();
    double per_rank[2] = {0, 0};
    for (const auto& s : res->arr()) per_rank[std::stoi(s["metric"]["rank"].str()) % 2] += sample_value(s);
    // A ring allreduce over 2 ranks moves the whole tensor each way: 16 MiB per step at least.
    for (double b : per_rank) EXPECT_GE(b, steps * 16.0 * (1 << 20)) << name;
  }
  // Both ranks run on this host: payloads went through the shared-memory rings on every stream
  // (a frame the ring cannot take in time goes on TCP, so no exact total here).
  auto shm = prom.wait_for("chorus_stream_shm_sent_bytes_total", all_positive, 30s);
  EXPECT_TRUE(shm && all_positive(*shm)) << (shm ? "a stream sent nothing through shared memory" : "no answer")
                                         << "\n" << prom.log();
  auto rate = prom.wait_for(
      "chorus_stream_throughput_bytes_per_second",
      [](const json& res) { return res.is_array() && res.arr().size() == 8; }, 10s);
  ASSERT_TRUE(rate && rate->arr().size() == 8);  // 2 ranks x 2 streams x sent/received
  for (const auto& s : rate->arr()) EXPECT_GE(sample_value(s), 0);
}

/// The value of chorus_mailbox_sent_bytes_total{path="`path`"} on a /metrics page (-1: absent).
double mailbox_value(const std::string& page, const std::string& path) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("chorus_mailbox_sent_bytes_total{", 0) == 0 &&
        line.find("path=\"" + path + "\"") != std::string::npos)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

// The pipeline's direct path (one host, mailboxes) moves bytes no stream counts: they show in
// chorus_mailbox_sent_bytes_total{path="pipeline"}, and the streams carry almost nothing; with
// the path off, that counter stays 0 and the streams carry the tensors.
TEST(pipeline_metrics, the_direct_paths_bytes_are_counted_apart_from_the_streams) {
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct path on" : "direct path off");
    metrics_job j(direct);
    ASSERT_NE(j.base, 0);
    ASSERT_TRUE(j.ready()) << j.job.output(0) << j.job.output(1);
    for (int r = 0; r < 2; ++r) {
      auto page = http_get("127.0.0.1", j.base + r, "/metrics");
      ASSERT_TRUE(page && page->code == 200) << "rank " << r;
      const double piped = mailbox_value(page->body, "pipeline"), caller = mailbox_value(page->body, "caller");
      ASSERT_GE(piped, 0) << page->body;
      ASSERT_GE(caller, 0) << page->body;
      double streams = 0;
      std::istringstream lines(page->body);
      for (std::string line; std::getline(lines, line);)
        if (line.rfind("chorus_stream_sent_bytes_total{", 0) == 0)
          streams += std::stod(line.substr(line.rfind(' ') + 1));
      // Each step posts the 16 MiB tensor (and the small ones) to the one peer.
      const double tensors = steps * 16.0 * (1 << 20);
      if (direct) {
        EXPECT_GE(piped, tensors) << "rank " << r;
        EXPECT_LT(streams, tensors / 4) << "rank " << r;
      } else {
        EXPECT_EQ(piped, 0) << "rank " << r;
        EXPECT_GE(streams, tensors) << "rank " << r;
      }
    }
  }
}

/// Every chorus_* name in the dashboard's queries (panel targets and template variables).
std::set<std::string> dashboard_metric_names(const json& dash) {
  std::set<std::string> names;
  static const std::regex metric("chorus_[a-z0-9_]+");
  auto scan = [&](const std::string& expr) {
    for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) names.insert(it->str());
  };
  std::function<void(const json&)> walk = [&](const json& panel) {
    for (const auto& t : panel["targets"].is_array() ? panel["targets"].arr() : json::array{})
      if (t["expr"].is_string()) scan(t["expr"].str());
    for (const auto& p : panel["panels"].is_array() ? panel["panels"].arr() : json::array{}) walk(p);
  };
  walk(dash);
  for (const auto& v : dash["templating"]["list"].is_array() ? dash["templating"]["list"].arr() : json::array{}) {
    if (v["query"].is_string()) scan(v["query"].str());
    if (v["query"]["query"].is_string()) scan(v["query"]["query"].str());
  }
  return names;
}

TEST(pipeline_metrics, every_metric_the_grafana_dashboard_queries_is_exposed) {
  std::ifstream in(repo_file("telemetry/grafana/chorus.json"));
  ASSERT_TRUE(in) << repo_file("telemetry/grafana/chorus.json");
  std::stringstream ss;
  ss << in.rdbuf();
  json dash = json::parse(ss.str());
  bool has_rank = false;
  for (const auto& v : dash["templating"]["list"].arr()) has_rank |= v["name"].is_string() && v["name"].str() == "rank";
  EXPECT_TRUE(has_rank) << "the dashboard needs a `rank` template variable";
  auto names = dashboard_metric_names(dash);
  ASSERT_GE(names.size(), 10u);
  // The panel of the slowest peer and connection queries the per-peer series.
  EXPECT_TRUE(names.count("chorus_stream_peer_sent_bytes_total")) << "no panel shows the slowest connection";
  // Compression and the NaN/Inf check have their panels.
  EXPECT_TRUE(names.count("chorus_compressed_bytes_total")) << "no panel shows compressed bytes";
  EXPECT_TRUE(names.count("chorus_nonfinite_total")) << "no panel shows non-finite findings";
  EXPECT_TRUE(names.count("chorus_stream_peer_throughput_bytes_per_second"));
  // The one-host direct path's bytes, which no stream counts.
  EXPECT_TRUE(names.count("chorus_mailbox_sent_bytes_total")) << "no panel shows the mailboxes' bytes";

  metrics_job j;
  ASSERT_NE(j.base, 0);
  ASSERT_TRUE(j.ready()) << j.job.output(0) << j.job.output(1);
  for (int r = 0; r < 2; ++r) {
    auto page = http_get("127.0.0.1", j.base + r, "/metrics");
    ASSERT_TRUE(page && page->code == 200) << "rank " << r;
    std::set<std::string> exposed;
    std::istringstream lines(page->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == '#') continue;
      exposed.insert(line.substr(0, line.find_first_of("{ ")));
    }
    for (const auto& n : names) EXPECT_TRUE(exposed.count(n)) << n << " is queried by the dashboard but rank " << r
                                                               << " does not expose it";
  }
}

}  // namespace
}  // namespace chorus::testing
