// chorus-bench pipeline: each step enqueues the 161 gradient tensors of ResNet-50 (f32, average)
// in reverse layer order through the actor pipeline, optionally with compute between them, and
// waits for every callback. The same bytes then go through the bare data plane as one fused
// allreduce (the best the collectives can do). Prints
//   RESULT pipeline <N> <step_ms> <bare_collectives_ms> <negotiation_p50_us> <negotiation_p99_us>
// Times are medians over the timed steps of the per-step max over ranks; a comment line after it
// gives the median of the per-step ratios step / bare (each step paired with the bare allreduce
// that follows it, so both see the same moment of a noisy machine). With variants
// (--metrics, --trace: telemetry; --fp16, --nancheck: every gradient asks for fp16 on the wire or
// the NaN/Inf check), the steps of each variant interleave with the plain ones in the same
// pipeline (bench/pipeline/variant_switch.hpp) and each gets its own line,
// `RESULT pipeline_<variant> ...`; the negotiation percentiles are the pipeline's, over all steps.
#include "bench/pipeline/pipeline_bench.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "bench/pipeline/resnet_backward.hpp"
#include "bench/pipeline/variant_switch.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/fusion/resnet50_sizes.hpp"
#include "telemetry/metrics/metrics_observer.hpp"
#include "telemetry/trace/recorder.hpp"

namespace chorus::bench {
namespace {

using clock_type = std::chrono::steady_clock;

float* pretouched_floats(std::size_t count) {
  void* p = mmap(nullptr, count * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map the gradient buffers");
  std::memset(p, 0, count * sizeof(float));
  return static_cast<float*>(p);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void check(const status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

/// The settings the pipeline starts with, as a variant's observer is told them.
telemetry::tunables tunables_of(const communicator& comm, const pipeline_options& opts) {
  telemetry::tunables t;
  t.fusion_threshold = opts.fusion_threshold;
  t.chunk_bytes = opts.chunk_bytes;
  t.streams = comm.num_streams();
  t.cycle_time = std::chrono::duration_cast<std::chrono::microseconds>(opts.cycle_time);
  t.in_place_bytes = opts.in_place_bytes;
  return t;
}

telemetry::context context_of(const communicator& comm) {
  telemetry::context ctx;
  ctx.rank = comm.rank();
  ctx.size = comm.size();
  ctx.streams = comm.num_streams();
  return ctx;
}

/// The observer of a telemetry variant, as a job would run it.
std::shared_ptr<telemetry::observer> make_variant(const std::string& name, communicator& comm,
                                                  const config& cfg, const pipeline_options& opts) {
  if (name == "metrics") {
    telemetry::context ctx = context_of(comm);
    ctx.traffic = [&comm](int s) {
      auto t = comm.plane().traffic(s);
      return telemetry::stream_traffic{t.sent, t.received};
    };
    auto m = std::make_shared<telemetry::metrics_observer>(ctx);
    // Served as in a job (CHORUS_METRICS_PORT + rank, or any free port), so the exposer's
    // threads are there too; a port in use only loses the endpoint.
    auto where = telemetry::metrics_options::from_config(cfg.telemetry);
    auto port = m->serve(where.address, where.base_port ? where.base_port + comm.rank() : 0);
    if (!port) std::fprintf(stderr, "# metrics: %s\n", port.error().to_string().c_str());
    m->on_tunables(tunables_of(comm, opts), std::chrono::steady_clock::now());
    return m;
  }
  if (name == "trace") {
    // The recorder of CHORUS_TRACE=<dir>, as a job runs it; without CHORUS_TRACE the bench
    // writes to /tmp/chorus-bench-trace (rank-<r>.trace, left for chorus-trace).
    telemetry::context ctx = context_of(comm);
    auto traced = cfg.telemetry;
    if (traced.trace_dir.empty()) traced.trace_dir = "/tmp/chorus-bench-trace";
    auto rec = telemetry::trace::trace_from_config(ctx, traced);
    if (!rec) throw std::runtime_error(rec.error().to_string());
    (*rec)->on_tunables(tunables_of(comm, opts), std::chrono::steady_clock::now());
    return *rec;
  }
  if (name == "fp16" || name == "nancheck") return nullptr;  // what the ops ask for (step_settings)
  throw std::runtime_error("unknown pipeline variant '" + name + "' (known: metrics, trace, fp16, nancheck)");
}

}  // namespace

/// What a variant's gradients ask for: fp16 on the wire (as the job's compression policy runs
/// it), or the NaN/Inf check that skips (CHORUS_NAN_CHECK=skip).
std::pair<compression, nan_check> step_settings(const std::string& name) {
  if (name == "fp16") return {compression::fp16, nan_check::off};
  if (name == "nancheck") return {compression::none, nan_check::skip};
  return {compression::none, nan_check::off};
}

int run_pipeline_bench(communicator& comm, std::shared_ptr<tcp::control_link> control, int steps, std::chrono::microseconds compute,
                       const std::vector<std::string>& variants) {
  auto cfg = read_config();
  if (!cfg) throw std::runtime_error(cfg.error().to_string());
  auto opts = pipeline_options::from_config(*cfg);
  // Variant 0 is the plain pipeline (no observer selected).
  std::vector<std::string> names{"pipeline"};
  std::vector<std::shared_ptr<telemetry::observer>> observers{nullptr};
  for (const auto& v : variants) {
    names.push_back("pipeline_" + v);
    observers.push_back(make_variant(v, comm, *cfg, opts));
  }
  auto switcher = std::make_shared<variant_switch>();
  if (!variants.empty()) opts.observer = switcher;
  auto pipe = pipeline::start(comm, std::move(control), opts);
  if (!pipe) throw std::runtime_error(pipe.error().to_string());

  std::size_t total = resnet50_parameter_count;
  float* grads = pretouched_floats(total);
  std::vector<std::size_t> offset(resnet50_tensor_count + 1, 0);
  for (std::size_t i = 0; i < resnet50_tensor_count; ++i) offset[i + 1] = offset[i] + resnet50_sizes[i];

  auto refill = [&] {
    float v = static_cast<float>(comm.rank() + 1);
    std::fill(grads, grads + total, v);
  };
  // Mean of (rank + 1) over ranks.
  float want = static_cast<float>(comm.size() + 1) / 2.0f;

  constexpr int warmups = 3;
  const std::size_t nv = names.size();
  std::vector<std::vector<double>> step_ms(nv), bare_ms(nv);
  std::vector<variant_switch::usage> used(nv);  // the observer's own time in the timed steps
  for (int s = 0; s < (warmups + steps) * static_cast<int>(nv); ++s) {
    const std::size_t v = static_cast<std::size_t>(s) % nv;
    switcher->take();
    switcher->select(observers[v].get());
    refill();
    check(comm.barrier(), "barrier");
    const auto [wire, checked] = step_settings(v ? variants[v - 1] : "");
    const double ms = resnet_backward_step(**pipe, grads, offset, compute, wire, checked);
    for (std::size_t k = 0; k < resnet50_tensor_count; ++k)
      if (grads[offset[k]] != want) throw std::runtime_error("wrong average in tensor " + std::to_string(k));

    refill();
    check(comm.barrier(), "barrier");
    auto b0 = clock_type::now();
    check(comm.allreduce(grads, total, dtype::f32, reduce_op::average), "bare allreduce");
    auto b1 = clock_type::now();
    if (grads[total - 1] != want) throw std::runtime_error("wrong bare allreduce result");
    if (s >= warmups * static_cast<int>(nv)) {
      step_ms[v].push_back(ms);
      bare_ms[v].push_back(std::chrono::duration<double, std::milli>(b1 - b0).count());
      auto u = switcher->take();
      used[v].busy += u.busy;
      used[v].calls += u.calls;
    }
  }
  switcher->select(nullptr);
  for (std::size_t v = 0; v < nv; ++v) {
    check(comm.allreduce(step_ms[v].data(), step_ms[v].size(), dtype::f64, reduce_op::max), "max of step times");
    check(comm.allreduce(bare_ms[v].data(), bare_ms[v].size(), dtype::f64, reduce_op::max), "max of bare times");
  }
  auto stats = (*pipe)->stats();
  if (comm.rank() == 0) {
    std::printf("# pipeline: %zu tensors, %.1f MB per step, %d timed steps, compute %lld us per tensor\n",
                resnet50_tensor_count, static_cast<double>(total) * 4 / 1e6, steps,
                static_cast<long long>(compute.count()));
    for (std::size_t v = 0; v < nv; ++v)
      std::printf("RESULT %s %d %.2f %.2f %.0f %.0f\n", names[v].c_str(), comm.size(), median(step_ms[v]),
                  median(bare_ms[v]), stats.negotiation.p50_us, stats.negotiation.p99_us);
    // On a noisy machine the two medians can come from different moments; each step and the bare
    // allreduce right after it share theirs, so the median of their ratios is the steadier figure.
    std::vector<double> paired;
    for (std::size_t i = 0; i < step_ms[0].size(); ++i)
      if (bare_ms[0][i] > 0) paired.push_back(step_ms[0][i] / bare_ms[0][i]);
    std::printf("# %s: step / bare %.3f (median of the per-step ratios of %zu paired steps)\n", names[0].c_str(),
                paired.empty() ? 0.0 : median(paired), paired.size());
    for (std::size_t v = 1; v < nv; ++v) {
      double plain = median(step_ms[0]), with = median(step_ms[v]);
      std::printf("# %s: step time %+.2f%% vs pipeline (medians of %d interleaved steps each; bare %+.2f%%)\n",
                  names[v].c_str(), 100.0 * (with - plain) / plain, steps,
                  100.0 * (median(bare_ms[v]) - median(bare_ms[0])) / median(bare_ms[0]));
      double busy_us = std::chrono::duration<double, std::micro>(used[v].busy).count() / steps;
      if (observers[v])
        std::printf("# %s: rank 0's observer ran %.1f us per step in %.0f calls (%.0f ns per call), %.3f%% of the "
                  "median plain step\n",
                  names[v].c_str(), busy_us, static_cast<double>(used[v].calls) / steps,
                  used[v].calls ? 1e3 * busy_us * steps / static_cast<double>(used[v].calls) : 0.0,
                  100.0 * busy_us / (1e3 * plain));
      if (auto* t = dynamic_cast<telemetry::trace::recorder*>(observers[v].get())) {
        t->flush();
        std::printf("# %s: rank 0's writer thread used %.1f us of CPU per traced step (whole run / traced "
                    "steps); %.1f KB of trace per step (%s)\n",
                    names[v].c_str(), std::chrono::duration<double, std::micro>(t->writer_cpu()).count() / steps,
                    static_cast<double>(t->bytes_written()) / 1e3 / (steps + warmups), t->path().c_str());
      }
      if (auto* m = dynamic_cast<telemetry::metrics_observer*>(observers[v].get())) {
        constexpr int scrapes = 20;
        auto c0 = clock_type::now();
        std::size_t chars = 0;
        for (int i = 0; i < scrapes; ++i) chars += m->scrape_text().size();
        auto c1 = clock_type::now();
        std::printf("# %s: one scrape (collect + text format, %zu bytes) takes %.0f us\n", names[v].c_str(),
                    chars / scrapes, std::chrono::duration<double, std::micro>(c1 - c0).count() / scrapes);
      }
    }
    std::fflush(stdout);
  }
  (*pipe)->shutdown();
  return 0;
}

}  // namespace chorus::bench
