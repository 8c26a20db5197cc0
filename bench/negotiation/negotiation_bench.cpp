// chorus-bench negotiation (see negotiation_bench.hpp). A measured cycle: every rank enqueues
// `tensors` tensors (names reused from cycle to cycle, so after the warm-up they travel as
// bits, as a training loop's gradients do), then we wait until every rank agreed them.
// Its duration runs from the first rank's cycle start to the last rank's cycle end (the
// strategies' own cycle records, steady_clock, comparable across processes of one host).
// Messages per rank and cycle are the control messages the rank's negotiator actor sent and
// received during the measured cycle(s), divided by the cycles it took part in.
#include "bench/negotiation/negotiation_bench.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actors/in_process_job.hpp"
#include "actors/pipeline.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/negotiation/simulator.hpp"

namespace chorus::bench {
namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::microseconds;

constexpr int warmup_cycles = 3;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

double us_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

tensor_spec gradient(int i, int64_t elements) {
  return tensor_spec{"grad." + std::to_string(i), collective_kind::allreduce, dtype::f32, {elements},
                     reduce_op::average, -1, device_kind::cpu, 0};
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// The same cycles in the scale simulator (runtime/negotiation/simulator.hpp): the same
/// strategies and links, but one core per rank, each busy `per_message` for every message it
/// sends or receives. Returns the cycle p50 and p99 in µs (same definition as above).
std::pair<double, double> one_core_per_rank(const negotiation_bench_options& o, const std::vector<tensor_spec>& specs,
                                            microseconds cycle_time, std::chrono::nanoseconds per_message) {
  negotiation::simulator_options so;
  so.strategy = o.strategy;
  so.negotiation.cycle_time = cycle_time;
  so.negotiation.stall_warning_time = std::chrono::seconds(0);
  so.min_latency = so.max_latency = microseconds(o.link_latency_us);
  so.processing_time = per_message;
  auto sim = negotiation::simulator::create(o.ranks, so);
  if (!sim) throw std::runtime_error(sim.error().to_string());
  auto& m = **sim;
  const auto n = static_cast<std::size_t>(o.ranks);
  std::vector<std::size_t> seen(n, 0);
  std::vector<double> cycle_us;
  for (int s = 0; s < warmup_cycles + o.cycles; ++s) {
    for (int r = 0; r < o.ranks; ++r)
      for (const auto& sp : specs) m.enqueue(r, sp);
    if (!m.run_until_idle(std::chrono::seconds(100))) throw std::runtime_error("the simulator did not settle");
    auto first = negotiation::time_point::max(), last = negotiation::time_point::min();
    for (std::size_t r = 0; r < n; ++r) {
      const auto& cycles = m.record(static_cast<int>(r)).cycles;
      for (std::size_t k = seen[r]; k < cycles.size(); ++k) {
        first = std::min(first, cycles[k].started);
        last = std::max(last, cycles[k].finished);
      }
      seen[r] = cycles.size();
    }
    if (s >= warmup_cycles && first <= last) cycle_us.push_back(us_between(first, last));
    m.run_for(std::chrono::milliseconds(10));  // the next step starts later, as in the real run
  }
  return {percentile(cycle_us, 0.5), percentile(cycle_us, 0.99)};
}

}  // namespace

int run_negotiation_bench(const negotiation_bench_options& o) {
  in_process_job_options jo;
  jo.ranks = o.ranks;
  jo.strategy = o.strategy;
  // No lower bound by default: measure the cycle itself.
  jo.negotiation.cycle_time = microseconds(std::max(0L, o.cycle_time_us));
  jo.negotiation.stall_warning_time = std::chrono::seconds(0);
  jo.link_latency = microseconds(o.link_latency_us);
  jo.scheduler_threads = o.threads;
  jo.busy_poll = o.busy_poll;
  auto started = clock_type::now();
  auto job = in_process_job::start(jo);
  if (!job) throw std::runtime_error(job.error().to_string());
  auto& j = **job;
  const auto n = static_cast<std::size_t>(o.ranks);
  double start_ms = std::chrono::duration<double, std::milli>(clock_type::now() - started).count();

  std::vector<tensor_spec> specs;
  for (int i = 0; i < o.tensors; ++i) specs.push_back(gradient(i, 256));
  std::vector<std::size_t> cycles_seen(n, 0);
  std::vector<uint64_t> messages_seen(n, 0);
  std::vector<double> cycle_us, step_us;
  double max_messages = 0, cycles_taken = 0;
  auto timeout = std::chrono::milliseconds(30000 + 50 * static_cast<long>(n));
  double cpu_at_start = 0;
  uint64_t handled_at_start = 0;
  auto handled_now = [&] {
    uint64_t total = 0;
    for (std::size_t r = 0; r < n; ++r) total += j.messages(static_cast<int>(r)).sent + j.messages(static_cast<int>(r)).received;
    return total;
  };
  for (int s = 0; s < warmup_cycles + o.cycles; ++s) {
    if (s == warmup_cycles) {
      cpu_at_start = cpu_seconds();
      handled_at_start = handled_now();
    }
    auto t0 = clock_type::now();
    for (std::size_t r = 0; r < n; ++r)
      for (const auto& sp : specs) j.enqueue(static_cast<int>(r), sp);
    if (auto st = j.wait(timeout); !st.ok()) throw std::runtime_error("cycle " + std::to_string(s) + ": " + st.to_string());
    auto t1 = clock_type::now();
    auto first = clock_type::time_point::max(), last = clock_type::time_point::min();
    double step_max_messages = 0, step_cycles = 0;
    for (std::size_t r = 0; r < n; ++r) {
      auto cycles = j.cycles(static_cast<int>(r));
      for (std::size_t k = cycles_seen[r]; k < cycles.size(); ++k) {
        first = std::min(first, cycles[k].started);
        last = std::max(last, cycles[k].finished);
      }
      auto taken = cycles.size() - cycles_seen[r];
      cycles_seen[r] = cycles.size();
      auto m = j.messages(static_cast<int>(r));
      uint64_t handled = m.sent + m.received;
      if (taken > 0)
        step_max_messages = std::max(step_max_messages, std::ceil(static_cast<double>(handled - messages_seen[r]) /
                                                                  static_cast<double>(taken)));
      messages_seen[r] = handled;
      step_cycles = std::max(step_cycles, static_cast<double>(taken));
    }
    if (s < warmup_cycles) continue;
    cycle_us.push_back(first <= last ? us_between(first, last) : 0);
    step_us.push_back(us_between(t0, t1));
    max_messages = std::max(max_messages, step_max_messages);
    cycles_taken += step_cycles;
  }
  double cpu_us = (cpu_seconds() - cpu_at_start) * 1e6;
  auto handled = handled_now() - handled_at_start;
  if (auto d = j.divergence(); !d.empty()) throw std::runtime_error("ranks disagree: " + d);
  j.stop();
  // What the same actors would do with a core each: the CPU this process spent per message
  // handled (everything: CAF, codec, strategy, observer), charged per message in the simulator.
  auto per_message = std::chrono::nanoseconds(handled ? static_cast<int64_t>(cpu_us * 1e3 / static_cast<double>(handled)) : 0);
  auto [model_p50, model_p99] =
      one_core_per_rank(o, specs, std::chrono::duration_cast<microseconds>(jo.negotiation.cycle_time), per_message);
  std::printf("# negotiation in one process: strategy=%s N=%d link_latency_us=%ld cycle_time_us=%lld tensors=%d "
              "threads=%d%s start_ms=%.0f cycles=%d cycles_per_step=%.2f step_p50_us=%.0f step_p99_us=%.0f (enqueue of all "
              "ranks -> every rank agreed)\n",
              o.strategy.c_str(), o.ranks, o.link_latency_us, static_cast<long long>(jo.negotiation.cycle_time.count() / 1000),
              o.tensors, o.threads, o.busy_poll ? " busy_poll" : "",
              start_ms, o.cycles, cycles_taken / std::max(1, o.cycles), percentile(step_us, 0.5),
              percentile(step_us, 0.99));
  std::printf("# one core per rank (scale simulator, same strategy and links, %.2f us of CPU per message handled as "
              "measured here): cycle_p50_us=%.0f cycle_p99_us=%.0f\n",
              static_cast<double>(per_message.count()) / 1e3, model_p50, model_p99);
  std::printf("RESULT negotiation %s %d %ld %.0f %.0f %.0f\n", o.strategy.c_str(), o.ranks, o.link_latency_us,
              percentile(cycle_us, 0.5), percentile(cycle_us, 0.99), max_messages);
  std::fflush(stdout);
  return 0;
}

namespace {

/// Keeps this rank's cycles and the latest agreement (the pipeline's negotiator calls it).
class cycle_recorder final : public telemetry::observer {
 public:
  void on_cycle(const telemetry::cycle_event& c) override {
    std::lock_guard lk(mu_);
    cycles_.push_back(c);
  }
  void on_agreed(uint64_t cycle, std::span<const std::string>, std::span<const microseconds> latencies,
                 telemetry::time_point) override {
    std::lock_guard lk(mu_);
    agreed_cycle_ = cycle;
    agreed_latency_ = latencies.empty() ? microseconds(0) : latencies.front();
  }
  void on_ready(uint64_t, const tensor_spec&, uint64_t, telemetry::time_point at) override {
    std::lock_guard lk(mu_);
    ready_at_ = at;
  }
  /// When the newest op reached the negotiator.
  telemetry::time_point ready_at() {
    std::lock_guard lk(mu_);
    return ready_at_;
  }
  /// The cycle that agreed the newest batch and that batch's enqueue → agreed latency.
  bool last(telemetry::cycle_event& c, microseconds& latency) {
    std::lock_guard lk(mu_);
    for (auto it = cycles_.rbegin(); it != cycles_.rend(); ++it)
      if (it->cycle == agreed_cycle_) {
        c = *it;
        latency = agreed_latency_;
        return true;
      }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<telemetry::cycle_event> cycles_;
  uint64_t agreed_cycle_ = 0;
  microseconds agreed_latency_{0};
  telemetry::time_point ready_at_{};
};

void check(const status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

}  // namespace

int run_negotiation_processes_bench(communicator& comm, std::shared_ptr<tcp::control_link> control,
                                    const negotiation_bench_options& options) {
  auto o = options;
  if (const char* c = std::getenv("CHORUS_BENCH_COMPARE_DATA_PLANE"); c && std::string(c) == "1")
    o.compare_data_plane = true;
  auto cfg = read_config();
  if (!cfg) throw std::runtime_error(cfg.error().to_string());
  auto opts = pipeline_options::from_config(*cfg);
  opts.negotiation = o.strategy;
  if (o.cycle_time_us >= 0) opts.cycle_time = microseconds(o.cycle_time_us);
  auto recorder = std::make_shared<cycle_recorder>();
  opts.observer = recorder;
  auto pipe = pipeline::start(comm, std::move(control), opts);
  if (!pipe) throw std::runtime_error(pipe.error().to_string());

  const int n = comm.size();
  std::vector<double> cycle_us, agreed_us, after_last_us, exchange_us, hop_us, skew_us;
  float data[4] = {1, 2, 3, 4};
  for (int s = 0; s < warmup_cycles + o.cycles; ++s) {
    // Every rank enqueues at the same instant (one host: one steady clock): rank 0 names a
    // start 1 ms ahead; each rank sleeps until shortly before it and spins the rest. A barrier
    // alone left the ranks' enqueues ~300 us apart, which is waiting for a straggler, not
    // negotiation.
    int64_t start_ns = (clock_type::now() + std::chrono::milliseconds(1)).time_since_epoch().count();
    check(comm.broadcast(&start_ns, 1, dtype::i64, 0), "broadcast of the start time");
    auto start = clock_type::time_point(clock_type::duration(start_ns));
    std::this_thread::sleep_until(start - microseconds(150));
    while (clock_type::now() < start) {
    }
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    status result;
    op_request r;
    r.spec = gradient(0, 4);
    r.spec.name = "negotiation.probe";
    r.input = r.output = data;
    r.done = [&](const status& st, std::vector<std::byte>, std::vector<int64_t>) {
      std::lock_guard lk(mu);
      result = st;
      done = true;
      cv.notify_all();
    };
    auto enqueued_at = clock_type::now();
    (*pipe)->enqueue(std::move(r));
    {
      std::unique_lock lk(mu);
      if (!cv.wait_for(lk, std::chrono::seconds(30), [&] { return done; }))
        throw std::runtime_error("cycle " + std::to_string(s) + ": no callback within 30 s");
    }
    check(result, "probe allreduce");
    telemetry::cycle_event c;
    microseconds latency{0};
    if (!recorder->last(c, latency)) throw std::runtime_error("no cycle record for the probe's agreement");
    constexpr int k = 5;  // per rank: cycle start, cycle end, agreed latency, API -> negotiator, enqueue time
    int64_t mine[k] = {c.started.time_since_epoch().count(), c.finished.time_since_epoch().count(), latency.count(),
                       std::chrono::duration_cast<std::chrono::nanoseconds>(recorder->ready_at() - enqueued_at).count(),
                       enqueued_at.time_since_epoch().count()};
    std::vector<int64_t> all(static_cast<std::size_t>(k * n));
    check(comm.allgather(mine, all.data(), std::vector<std::size_t>(static_cast<std::size_t>(n), k), dtype::i64),
          "allgather of cycle times");
    if (s >= warmup_cycles) {
      int64_t first = all[0], last = all[1], slowest = all[2], hop = all[3], early = all[4], late = all[4];
      int64_t all_agreed = all[4] + all[2] * 1000;  // enqueue (ns) + latency (µs)
      for (int q = 1; q < n; ++q) {
        first = std::min(first, all[k * q]);
        last = std::max(last, all[k * q + 1]);
        slowest = std::max(slowest, all[k * q + 2]);
        hop = std::max(hop, all[k * q + 3]);
        early = std::min(early, all[k * q + 4]);
        late = std::max(late, all[k * q + 4]);
        all_agreed = std::max(all_agreed, all[k * q + 4] + all[k * q + 2] * 1000);
      }
      after_last_us.push_back(std::chrono::duration<double, std::micro>(clock_type::duration(all_agreed - late)).count());
      hop_us.push_back(static_cast<double>(hop) / 1e3);
      skew_us.push_back(std::chrono::duration<double, std::micro>(clock_type::duration(late - early)).count());
      cycle_us.push_back(std::chrono::duration<double, std::micro>(clock_type::duration(last - first)).count());
      agreed_us.push_back(static_cast<double>(slowest));
    }
    if (o.gap_us > 0) std::this_thread::sleep_for(microseconds(o.gap_us));
    if (!o.compare_data_plane) continue;
    // The same shape of exchange over the Asio data plane, for comparison: after the same idle
    // gap, a 16-byte allreduce (at N=2 one message each way, as one gossip cycle).
    check(comm.barrier(), "barrier");
    auto x0 = clock_type::now();
    check(comm.allreduce(data, 4, dtype::f32, reduce_op::sum), "16-byte allreduce");
    double x = us_between(x0, clock_type::now());
    check(comm.allreduce(&x, 1, dtype::f64, reduce_op::max), "max of exchange times");
    if (s >= warmup_cycles) exchange_us.push_back(x);
    if (o.gap_us > 0) std::this_thread::sleep_for(microseconds(o.gap_us));
  }
  check(comm.barrier(), "final barrier");
  if (comm.rank() == 0) {
    std::printf("# negotiation across %d processes: strategy=%s cycles=%d gap_us=%ld cycle_time_us=%lld; cycle = "
                "first rank's cycle start -> last rank's cycle end, agreed = enqueue -> agreed (max over ranks)\n",
                n, o.strategy.c_str(), o.cycles, o.gap_us, static_cast<long long>(opts.cycle_time.count()));
    std::printf("# where enqueue -> agreed goes: API -> negotiator p50 %.0f us (max over ranks), enqueue skew between "
                "ranks p50 %.0f us (a synchronised start; the rest is this host's scheduling); last rank's enqueue -> "
                "every rank agreed p50 %.0f us p99 %.0f us\n",
                percentile(hop_us, 0.5), percentile(skew_us, 0.5), percentile(after_last_us, 0.5),
                percentile(after_last_us, 0.99));
    if (o.compare_data_plane)
      std::printf("# for comparison, a 16-byte allreduce over the Asio data plane after the same gap (barrier -> done, "
                "max over ranks): p50 %.0f us, p99 %.0f us\n",
                percentile(exchange_us, 0.5), percentile(exchange_us, 0.99));
    std::printf("RESULT negotiation_processes %s %d %.0f %.0f %.0f %.0f\n", o.strategy.c_str(), n,
                percentile(cycle_us, 0.5), percentile(cycle_us, 0.99), percentile(agreed_us, 0.5),
                percentile(agreed_us, 0.99));
    std::fflush(stdout);
  }
  (*pipe)->shutdown();
  return 0;
}

}  // namespace chorus::bench
