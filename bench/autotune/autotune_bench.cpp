// chorus-bench autotune: the autotuner against a grid of fixed configurations, in one job.
// Two communicators, one pipeline each (a communicator carries one pipeline): "fixed", autotune
// off, whose tunables are set between steps (pipeline::set_tunables, the autotuner's own switch
// messages), and "tuned", CHORUS_AUTOTUNE on, started at the poor configuration (1 stream,
// 256 KiB chunks, 1 MiB fusion). The workload is chorus-bench pipeline's ResNet-50 step.
//  1. start: the poor configuration, fixed, --steps steps.
//  2. grid: every (streams, chunk, fusion) of the grid, fixed (cycle time and in-place threshold
//     as configured), 1 warm-up + --grid-steps steps each; the 3 best again with --steps steps
//     each (the best of short medians is biased low); grid_best is the best of those medians.
//  3. tuned: steps on the tuned pipeline until every rank's autotuner has converged (or
//     --max-steps). samples_to_within_5pct: the first configuration the autotuner put in force
//     whose steps (at least 2, none spanning a switch) have a median within 5% of grid_best,
//     counted as the sample that measured it (-1: none).
//  4. cost: --cost-steps steps tuned (autotune on, converged), then as many with the same
//     configuration on the fixed pipeline (tuned_step_ms is the median of the tuned ones).
// The two pipelines use different connections, which shaping by port hash may treat differently:
// the bench also times the bare fused allreduce on each and prints the ratios divided by theirs.
// Prints on rank 0 (times: medians of per-step maxima over ranks, ms):
//   RESULT autotune <N> <start_step_ms> <tuned_step_ms> <grid_best_step_ms> <samples_to_within_5pct>
//   RESULT autotune_cost <N> <fixed_step_ms> <tuned_converged_step_ms>
//  5. with --retune-signal PATH (the emulated-hosts harness): rank 0 creates PATH and waits until
//     the harness, having changed the network, removes it; the tuned pipeline runs until its
//     autotuner searched again and converged (or --max-steps), then --steps steps
//     (retuned_step_ms), then the grid again (new_grid_best). samples_to_recover counts from
//     the change, as samples_to_within_5pct does (-1: none):
//   RESULT autotune_retune <N> <samples_to_recover> <new_grid_best_step_ms> <retuned_step_ms>
#include "bench/autotune/autotune_bench.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "actors/pipeline.hpp"
#include "bench/autotune/autotune_watch.hpp"
#include "bench/autotune/resnet_steps.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/env/process_env.hpp"

namespace chorus::bench {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void check(const status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

/// A TCP port free on every interface now (rank 0 serves the second store there).
uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("autotune bench: socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  if (!ok) throw std::runtime_error("autotune bench: cannot find a free port for the second communicator");
  return ntohs(a.sin_port);
}

/// The second communicator of this job: its own store, on a port rank 0 publishes in the first's.
std::unique_ptr<communicator> second_communicator(communicator& first, const process_env& env) {
  process_env second = env;
  auto& store = first.store();
  const std::string key = "bench/autotune/port";
  if (env.rank == 0) check(store.publish(key, std::to_string(free_port())), "publish the second store's port");
  auto port = store.get(key, std::chrono::seconds(60));
  if (!port) throw std::runtime_error(port.error().to_string());
  second.rendezvous_port = static_cast<uint16_t>(std::stoi(*port));
  auto comm = communicator::create(second);
  if (!comm) throw std::runtime_error("the tuned pipeline's communicator: " + comm.error().to_string());
  return std::move(*comm);
}

std::string describe(const telemetry::tunables& t) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "streams=%d chunk=%zuK fusion=%zuK cycle=%.3fms in_place=%zuK", t.streams,
                t.chunk_bytes >> 10, t.fusion_threshold >> 10, t.cycle_time.count() / 1e3, t.in_place_bytes >> 10);
  return buf;
}

/// One step of the tuned run, as rank 0 saw it.
struct tuned_step {
  double ms = 0;
  uint64_t samples = 0;   ///< samples finished when the step began
  uint64_t epoch = 0;     ///< switches seen when the step began
  bool mixed = false;     ///< a switch landed during the step
};

/// The sample that first measured a configuration within 5% of `best` (see the file comment).
long samples_to_within(const std::vector<tuned_step>& steps, double best) {
  std::size_t i = 0;
  while (i < steps.size()) {
    std::size_t j = i;
    std::vector<double> ms;
    for (; j < steps.size() && steps[j].epoch == steps[i].epoch; ++j)
      if (!steps[j].mixed) ms.push_back(steps[j].ms);
    if (ms.size() >= 2 && median(ms) <= 1.05 * best) return static_cast<long>(steps[i].samples) + 1;
    i = j;
  }
  return -1;
}

std::vector<double> block(pipeline& p, resnet_steps& w, int warmups, int steps) {
  std::vector<double> ms;
  for (int s = 0; s < warmups + steps; ++s) {
    auto r = w.run(p);
    if (s >= warmups) ms.push_back(r.ms);
  }
  return ms;
}

struct grid_result {
  double best_ms = 0;
  telemetry::tunables best;
  int points = 0;
};

/// Every point of the grid on the fixed pipeline; `like` gives cycle time and in-place threshold.
/// The best of a few short medians is biased low by the noise, so the 3 best points are measured
/// again with --steps steps each, and the best of those is the grid's best.
grid_result run_grid(pipeline& fixed, resnet_steps& work, const autotune_bench_options& o,
                     const telemetry::tunables& like, bool lead, const char* label) {
  grid_result g;
  std::vector<std::pair<double, telemetry::tunables>> all;
  for (auto streams : o.grid_streams)
    for (auto chunk : o.grid_chunks)
      for (auto fusion : o.grid_fusion) {
        telemetry::tunables t{fusion, chunk, static_cast<int>(streams), like.cycle_time, like.in_place_bytes};
        check(fixed.set_tunables(t), "set_tunables");
        double ms = median(block(fixed, work, 1, o.grid_steps));
        all.emplace_back(ms, t);
        ++g.points;
        if (lead) std::printf("# %s %2d: %s: %.2f ms\n", label, g.points, describe(t).c_str(), ms), std::fflush(stdout);
      }
  // Every rank sorts the same maxima over ranks alike.
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < std::min<std::size_t>(3, all.size()); ++i) {
    check(fixed.set_tunables(all[i].second), "set_tunables");
    double ms = median(block(fixed, work, 1, o.steps));
    if (lead) std::printf("# %s again: %s: %.2f ms\n", label, describe(all[i].second).c_str(), ms), std::fflush(stdout);
    if (g.best_ms == 0 || ms < g.best_ms) g.best_ms = ms, g.best = all[i].second;
  }
  if (lead) std::printf("# %s: %d points, best %s: %.2f ms\n", label, g.points, describe(g.best).c_str(), g.best_ms);
  return g;
}

/// Steps on the tuned pipeline until `done(view)` holds on every rank, or `max_steps`.
std::vector<tuned_step> run_tuned(pipeline& tuned, resnet_steps& work, autotune_watch& watch, int max_steps,
                                  const std::function<bool(const autotune_watch::view&)>& done, bool& reached) {
  std::vector<tuned_step> log;
  reached = false;
  for (int s = 0; s < max_steps && !reached; ++s) {
    auto before = watch.now();
    auto r = work.run(tuned, done(before));
    auto after = watch.now();
    log.push_back({r.ms, before.samples, before.switches, after.switches != before.switches});
    reached = r.all_flag;
  }
  return log;
}

/// The pipelines run on different connections, which the shaping's port hash may treat
/// differently: the bare fused allreduce on each (5, alternated), and the tuned connections'
/// median over the fixed ones'.
double connection_ratio(resnet_steps& fixed_work, resnet_steps& tuned_work, bool lead, const char* label) {
  std::vector<double> f, t;
  for (int i = 0; i < 5; ++i) f.push_back(fixed_work.bare()), t.push_back(tuned_work.bare());
  const double ratio = median(t) / median(f);
  if (lead)
    std::printf("# %s: bare fused allreduce of the same bytes on the fixed pipeline's connections %.2f ms, on the "
                "tuned one's %.2f ms (medians of 5, alternated): connections %.3f\n",
                label, median(f), median(t), ratio);
  return ratio;
}

/// Rank 0 asks the harness to change the network (creates `path`) and waits until it is done
/// (the harness removes it); every rank then meets at a barrier.
void change_network(communicator& comm, const std::string& path) {
  if (comm.rank() == 0) {
    {
      std::ofstream f(path);
      f << "reshape\n";
      if (!f) throw std::runtime_error("autotune: cannot write --retune-signal " + path);
    }
    std::printf("# retune: asked the harness to change the network (%s)\n", path.c_str());
    std::fflush(stdout);
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::filesystem::exists(path)) {
      if (std::chrono::steady_clock::now() > end)
        throw std::runtime_error("autotune: the harness did not change the network within 120 s (" + path + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  check(comm.barrier(), "barrier after the network change");
}

}  // namespace

int run_autotune_bench(const process_env& env, const autotune_bench_options& o) {
  if (o.steps < 1 || o.grid_steps < 1 || o.max_steps < 1 || o.cost_steps < 1)
    throw std::invalid_argument("autotune: --steps, --grid-steps, --max-steps and --cost-steps must be at least 1");
  auto fixed_comm = communicator::create(env);
  if (!fixed_comm) throw std::runtime_error(fixed_comm.error().to_string());
  communicator& comm = **fixed_comm;
  auto tuned_comm = second_communicator(comm, env);
  const bool lead = comm.rank() == 0;
  const int max_streams = comm.num_streams();
  for (auto s : o.grid_streams)
    if (s < 1 || s > static_cast<std::size_t>(max_streams))
      throw std::invalid_argument("autotune: --grid-streams " + std::to_string(s) + " outside 1.." +
                                  std::to_string(max_streams) + " (CHORUS_NUM_STREAMS)");

  auto cfg = read_config();
  if (!cfg) throw std::runtime_error(cfg.error().to_string());
  auto base = pipeline_options::from_config(*cfg);
  const auto cycle_time = std::chrono::duration_cast<std::chrono::microseconds>(base.cycle_time);
  const telemetry::tunables poor{1u << 20, 256u << 10, 1, cycle_time, base.in_place_bytes};

  auto fixed_watch = std::make_shared<autotune_watch>();
  auto fixed_opts = base;
  fixed_opts.autotune.enabled = false;
  fixed_opts.observer = fixed_watch;
  auto fixed = pipeline::start(comm, fixed_opts);
  if (!fixed) throw std::runtime_error("fixed pipeline: " + fixed.error().to_string());

  auto tuned_watch = std::make_shared<autotune_watch>();
  auto tuned_opts = base;
  tuned_opts.autotune.enabled = true;
  tuned_opts.observer = tuned_watch;
  tuned_opts.start_streams = poor.streams;
  tuned_opts.chunk_bytes = poor.chunk_bytes;
  tuned_opts.fusion_threshold = poor.fusion_threshold;
  auto tuned = pipeline::start(*tuned_comm, tuned_opts);
  if (!tuned) throw std::runtime_error("tuned pipeline: " + tuned.error().to_string());

  resnet_steps work(comm, o.compute);
  resnet_steps tuned_work(*tuned_comm, o.compute);
  if (lead) {
    std::printf("# autotune bench: N=%d, %d connections per peer, ResNet-50 (%.1f MB per step), compute %lld us per "
                "tensor; start %s\n",
                comm.size(), max_streams, static_cast<double>(work.bytes()) / 1e6,
                static_cast<long long>(o.compute.count()), describe(poor).c_str());
    std::fflush(stdout);
  }

  // 1. The poor start, fixed.
  check((*fixed)->set_tunables(poor), "set_tunables");
  const double start_ms = median(block(**fixed, work, 1, o.steps));

  // 2. The grid.
  auto grid = run_grid(**fixed, work, o, poor, lead, "grid");

  // 3. The tuned run, until every rank's autotuner watches.
  const uint64_t cycles_before = (*tuned)->stats().negotiation.cycles;
  bool converged = false;
  auto log = run_tuned(**tuned, tuned_work, *tuned_watch, o.max_steps,
                       [](const autotune_watch::view& v) { return v.watching; }, converged);
  auto at = tuned_watch->now();
  const double cycles_per_step =
      static_cast<double>((*tuned)->stats().negotiation.cycles - cycles_before) / static_cast<double>(log.size());
  if (lead) {
    std::printf("# tuned: %.1f negotiation cycles per step (a window is CHORUS_AUTOTUNE_STEPS_PER_SAMPLE cycles)\n",
                cycles_per_step);
    if (converged)
      std::printf("# tuned: converged after %llu samples, %zu steps: %s\n", static_cast<unsigned long long>(at.samples),
                  log.size(), describe(at.in_force).c_str());
    else
      std::printf("# tuned: not converged within %d steps (%llu samples); measured as it stands: %s\n", o.max_steps,
                  static_cast<unsigned long long>(at.samples), describe(at.in_force).c_str());
    std::fflush(stdout);
  }

  // 4. Converged: --cost-steps tuned steps, then as many of the same configuration fixed. Not
  //    alternated: the fixed steps would be idle time inside the tuned pipeline's windows, whose
  //    low scores could start a search of their own.
  auto tuned_ms = block(**tuned, tuned_work, 0, o.cost_steps);
  check((*fixed)->set_tunables(tuned_watch->now().in_force), "set_tunables");
  auto fixed_ms = block(**fixed, work, 1, o.cost_steps);
  const double connections = connection_ratio(work, tuned_work, lead, "cost");
  auto end = tuned_watch->now();
  if (lead) {
    if (end.switches != at.switches || (converged && !end.watching))
      std::printf("# tuned: the autotuner moved during the cost blocks (now %s, %s)\n", describe(end.in_force).c_str(),
                  end.watching ? "watching" : "searching");
    std::printf("RESULT autotune %d %.2f %.2f %.2f %ld\n", comm.size(), start_ms, median(tuned_ms), grid.best_ms,
                samples_to_within(log, grid.best_ms));
    std::printf("# tuned / grid best %.3f, / (grid best x connections) %.3f; tuned / fixed %.3f, / connections %.3f\n",
                median(tuned_ms) / grid.best_ms, median(tuned_ms) / (grid.best_ms * connections),
                median(tuned_ms) / median(fixed_ms), median(tuned_ms) / (median(fixed_ms) * connections));
    std::printf("RESULT autotune_cost %d %.2f %.2f\n", comm.size(), median(fixed_ms), median(tuned_ms));
    std::fflush(stdout);
  }

  // 5. The network changes; the autotuner must notice, search again and converge again.
  if (!o.retune_signal.empty()) {
    change_network(comm, o.retune_signal);
    const uint64_t samples_at_change = tuned_watch->now().samples;
    bool searched = false, recovered = false;
    auto relog = run_tuned(**tuned, tuned_work, *tuned_watch, o.max_steps,
                           [&searched](const autotune_watch::view& v) {
                             searched = searched || !v.watching;
                             return searched && v.watching;
                           },
                           recovered);
    auto now = tuned_watch->now();
    if (lead)
      std::printf("# retune: %s after %llu samples since the change (%zu steps): %s\n",
                  recovered ? "searched again and converged" : searched ? "searching, not converged" : "no new search",
                  static_cast<unsigned long long>(now.samples - samples_at_change), relog.size(),
                  describe(now.in_force).c_str());
    const double retuned_ms = median(block(**tuned, tuned_work, 0, o.steps));
    auto regrid = run_grid(**fixed, work, o, poor, lead, "new grid");
    const double reconnections = connection_ratio(work, tuned_work, lead, "retune");
    long k = samples_to_within(relog, regrid.best_ms);
    if (lead) {
      std::printf("# retune: retuned / new grid best %.3f, / (new grid best x connections) %.3f\n",
                  retuned_ms / regrid.best_ms, retuned_ms / (regrid.best_ms * reconnections));
      std::printf("RESULT autotune_retune %d %ld %.2f %.2f\n", comm.size(),
                  k < 0 ? -1L : k - static_cast<long>(samples_at_change), regrid.best_ms, retuned_ms);
      std::fflush(stdout);
    }
  }
  (*tuned)->shutdown();
  (*fixed)->shutdown();
  (*tuned).reset();
  (*fixed).reset();
  check(tuned_comm->barrier(), "final barrier");
  tuned_comm.reset();
  check(comm.barrier(), "final barrier");
  return 0;
}

}  // namespace chorus::bench
