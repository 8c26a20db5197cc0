// chorus-bench autotune: the autotuner against a grid of fixed configurations, in one job, on
// one pipeline (so on the same connections): CHORUS_AUTOTUNE on, started held
// (pipeline::hold_autotune), so that set_tunables drives it for the fixed runs; resumed for the
// tuned ones. The workload is chorus-bench pipeline's ResNet-50 step.
//  1. start: the poor configuration (1 stream, 256 KiB chunks, 1 MiB fusion), fixed, --steps steps.
//  2. grid: every (streams, chunk, fusion) of the grid, fixed (cycle time and in-place threshold
//     as configured), 1 warm-up + --grid-steps steps each; the 3 best again with --steps steps
//     each (the best of short medians is biased low); grid_best is the best of those medians.
//  3. tuned: back to the poor configuration, the autotuner resumed with its search restarted
//     there; steps until every rank's autotuner has converged (or --max-steps).
//     samples_to_within_5pct: the first configuration the autotuner put in force whose steps
//     (at least 2, none spanning a switch) have a median within 5% of grid_best, counted as the
//     sample that measured it (-1: none).
//  4. cost: --cost-steps steps tuned (autotune on, converged), then the autotuner held and as
//     many steps with the same configuration fixed (tuned_step_ms is the median of the tuned ones).
// Prints on rank 0 (times: medians of per-step maxima over ranks, ms):
//   RESULT autotune <N> <start_step_ms> <tuned_step_ms> <grid_best_step_ms> <samples_to_within_5pct>
//   RESULT autotune_cost <N> <fixed_step_ms> <tuned_converged_step_ms>
//  5. with --retune-signal PATH (the emulated-hosts harness): rank 0 creates PATH and waits until
//     the harness, having changed the network, removes it; the tuned pipeline runs until its
//     autotuner searched again and converged (or --max-steps), then --steps steps
//     (retuned_step_ms), then the grid again, held (new_grid_best). samples_to_recover counts from
//     the change, as samples_to_within_5pct does (-1: none):
//   RESULT autotune_retune <N> <samples_to_recover> <new_grid_best_step_ms> <retuned_step_ms>
#include "bench/autotune/autotune_bench.hpp"


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
  auto cfg = read_config();
  if (!cfg) throw std::runtime_error(cfg.error().to_string());
  auto made = communicator::connect(env, *cfg);
  if (!made) throw std::runtime_error(made.error().to_string());
  communicator& comm = *made->comm;
  const bool lead = comm.rank() == 0;
  const int max_streams = comm.num_streams();
  for (auto s : o.grid_streams)
    if (s < 1 || s > static_cast<std::size_t>(max_streams))
      throw std::invalid_argument("autotune: --grid-streams " + std::to_string(s) + " outside 1.." +
                                  std::to_string(max_streams) + " (CHORUS_NUM_STREAMS)");

  auto base = pipeline_options::from_config(*cfg);
  const auto cycle_time = std::chrono::duration_cast<std::chrono::microseconds>(base.cycle_time);
  const telemetry::tunables poor{1u << 20, 256u << 10, 1, cycle_time, base.in_place_bytes};

  auto watch = std::make_shared<autotune_watch>();
  auto opts = base;
  opts.autotune.enabled = true;
  opts.autotune_held = true;
  opts.observer = watch;
  opts.start_streams = poor.streams;
  opts.chunk_bytes = poor.chunk_bytes;
  opts.fusion_threshold = poor.fusion_threshold;
  auto started = pipeline::start(comm, std::move(made->control), opts);
  if (!started) throw std::runtime_error("pipeline: " + started.error().to_string());
  pipeline& p = **started;

  resnet_steps work(comm, o.compute);
  if (lead) {
    std::printf("# autotune bench: N=%d, %d connections per peer, ResNet-50 (%.1f MB per step), compute %lld us per "
                "tensor; start %s; one pipeline, fixed runs with the autotuner held\n",
                comm.size(), max_streams, static_cast<double>(work.bytes()) / 1e6,
                static_cast<long long>(o.compute.count()), describe(poor).c_str());
    std::fflush(stdout);
  }

  // 1. The poor start, fixed.
  check(p.set_tunables(poor), "set_tunables");
  const double start_ms = median(block(p, work, 1, o.steps));

  // 2. The grid.
  auto grid = run_grid(p, work, o, poor, lead, "grid");

  // 3. The tuned run from the poor start, until every rank's autotuner watches.
  check(p.set_tunables(poor), "set_tunables");
  check(p.resume_autotune(true), "resume_autotune");
  const uint64_t cycles_before = p.stats().negotiation.cycles;
  bool converged = false;
  auto log = run_tuned(p, work, *watch, o.max_steps, [](const autotune_watch::view& v) { return v.watching; },
                       converged);
  auto at = watch->now();
  const double cycles_per_step =
      static_cast<double>(p.stats().negotiation.cycles - cycles_before) / static_cast<double>(log.size());
  if (lead) {
    std::printf("# tuned: %.1f negotiation cycles per step (a window is CHORUS_AUTOTUNE_STEPS_PER_SAMPLE steps)\n",
                cycles_per_step);
    if (converged)
      std::printf("# tuned: converged after %llu samples, %zu steps: %s\n", static_cast<unsigned long long>(at.samples),
                  log.size(), describe(at.in_force).c_str());
    else
      std::printf("# tuned: not converged within %d steps (%llu samples); measured as it stands: %s\n", o.max_steps,
                  static_cast<unsigned long long>(at.samples), describe(at.in_force).c_str());
    std::fflush(stdout);
  }

  // 4. Converged: --cost-steps tuned steps, then as many of the same configuration with the
  //    autotuner held. Not alternated: fixed steps inside the tuned windows would score low and
  //    could start a search of their own.
  auto tuned_ms = block(p, work, 0, o.cost_steps);
  auto end = watch->now();
  check(p.hold_autotune(), "hold_autotune");
  check(p.set_tunables(end.in_force), "set_tunables");
  auto fixed_ms = block(p, work, 1, o.cost_steps);
  check(p.resume_autotune(false), "resume_autotune");
  if (lead) {
    if (end.switches != at.switches || (converged && !end.watching))
      std::printf("# tuned: the autotuner moved during the cost blocks (now %s, %s)\n", describe(end.in_force).c_str(),
                  end.watching ? "watching" : "searching");
    std::printf("RESULT autotune %d %.2f %.2f %.2f %ld\n", comm.size(), start_ms, median(tuned_ms), grid.best_ms,
                samples_to_within(log, grid.best_ms));
    std::printf("# tuned / grid best %.3f; tuned / fixed %.3f\n", median(tuned_ms) / grid.best_ms,
                median(tuned_ms) / median(fixed_ms));
    std::printf("RESULT autotune_cost %d %.2f %.2f\n", comm.size(), median(fixed_ms), median(tuned_ms));
    std::fflush(stdout);
  }

  // 5. The network changes; the autotuner must notice, search again and converge again.
  if (!o.retune_signal.empty()) {
    change_network(comm, o.retune_signal);
    const uint64_t samples_at_change = watch->now().samples;
    bool searched = false, recovered = false;
    auto relog = run_tuned(p, work, *watch, o.max_steps,
                           [&searched](const autotune_watch::view& v) {
                             searched = searched || !v.watching;
                             return searched && v.watching;
                           },
                           recovered);
    auto now = watch->now();
    if (lead)
      std::printf("# retune: %s after %llu samples since the change (%zu steps): %s\n",
                  recovered ? "searched again and converged" : searched ? "searching, not converged" : "no new search",
                  static_cast<unsigned long long>(now.samples - samples_at_change), relog.size(),
                  describe(now.in_force).c_str());
    const double retuned_ms = median(block(p, work, 0, o.steps));
    check(p.hold_autotune(), "hold_autotune");
    auto regrid = run_grid(p, work, o, poor, lead, "new grid");
    long k = samples_to_within(relog, regrid.best_ms);
    if (lead) {
      std::printf("# retune: retuned / new grid best %.3f\n", retuned_ms / regrid.best_ms);
      std::printf("RESULT autotune_retune %d %ld %.2f %.2f\n", comm.size(),
                  k < 0 ? -1L : k - static_cast<long>(samples_at_change), regrid.best_ms, retuned_ms);
      std::fflush(stdout);
    }
  }
  p.shutdown();
  started->reset();
  check(comm.barrier(), "final barrier");
  return 0;
}

}  // namespace chorus::bench
