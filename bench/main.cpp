// chorus-bench: run under `chorusrun -np N`.
//   chorus-bench allreduce [--impl chorus|gloo|floor|both|all] [--sizes 4K,64K,1M,16M,64M]
//                          [--streams S] [--chunk-bytes B] [--segment-bytes B]
//                          [--variants none,fp16,bf16,nancheck]
//       one RESULT line per size and implementation (see bench/allreduce_protocol.hpp); both is
//       chorus and gloo, all adds floor: a bare-socket ring of two ranks (bench/floor);
//       --variants adds Chorus with compression on the wire / the NaN check (chorus_fp16_tcp,
//       chorus_bf16_tcp, chorus_nancheck_tcp; busbw in the caller's float32 bytes)
//   chorus-bench allgather [--sizes 4K,64M] [--streams S] [--chunk-bytes B] [--segment-bytes B]
//       communicator::allgather under auto, hierarchical and flat (bench/allgather_bench.hpp)
//   chorus-bench pipeline [--steps K] [--compute-us U] [--metrics] [--trace] [--fp16] [--nancheck]
//       ResNet-50 gradients through the actor pipeline vs the bare collectives; --metrics adds
//       as many steps with Prometheus metrics on, interleaved (RESULT pipeline_metrics ...);
//       --trace as many with the trace recorder on (RESULT pipeline_trace ...; files in
//       $CHORUS_TRACE or /tmp/chorus-bench-trace); --fp16 / --nancheck as many whose gradients ask
//       for fp16 on the wire / the NaN/Inf check (RESULT pipeline_fp16, pipeline_nancheck)
//   chorus-bench negotiation --ranks N --strategy gossip|central --link-latency-us L [--cycles K]
//                            [--tensors T] [--threads X] [--busy-poll]
//       N negotiator actors in this one process (no chorusrun), only the wire modelled
//   chorus-bench negotiation --processes [--strategy S] [--cycles K] [--gap-us G] [--cycle-time-us C]
//       per-cycle negotiation across the processes of a chorusrun job
//   chorus-bench autotune [--steps K] [--grid-steps G] [--max-steps M] [--cost-steps C] [--compute-us U]
//                         [--grid-streams 1,2,4,8] [--grid-chunks 256K,1M,4M] [--grid-fusion 1M,8M,64M]
//                         [--retune-signal FILE]
//       the autotuner from a poor start against a grid of fixed configurations (RESULT autotune,
//       RESULT autotune_cost; with --retune-signal, the harness changes the network midway:
//       RESULT autotune_retune; bench/autotune/autotune_bench.cpp)
//   chorus-bench demo      the README's demo: what two ranks did and how fast
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/allgather_bench.hpp"
#include "bench/allreduce_protocol.hpp"
#include "bench/comma_list.hpp"
#include "bench/floor/tcp_floor.hpp"
#include "runtime/config/config.hpp"
#include "runtime/transport/tcp/iface.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#include "runtime/transport/tcp/iface.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#ifdef CHORUS_WITH_GLOO
#include "bench/gloo/gloo_peer.hpp"
#endif
#ifdef CHORUS_WITH_PIPELINE
#include "bench/autotune/autotune_bench.hpp"
#include "bench/negotiation/negotiation_bench.hpp"
#include "bench/pipeline/pipeline_bench.hpp"
#endif

using namespace chorus;

namespace {

// "none,fp16,bf16,nancheck" -> its words; anything else is a usage error.
std::vector<std::string> split_variants(const std::string& list) {
  std::vector<std::string> out = bench::split_commas(list);
  for (const auto& v : out)
    if (v != "none" && v != "fp16" && v != "bf16" && v != "nancheck")
      throw std::invalid_argument("--variants: '" + v + "' is not one of none, fp16, bf16, nancheck");
  return out;
}

struct options {
  std::string mode;
  int steps = 20;
  long compute_us = 0;
  std::vector<std::string> variants;  // pipeline: telemetry variants measured beside the plain steps
  std::string impl = "both";
  /// allreduce --variants: none (chorus_tcp), fp16, bf16, nancheck (chorus_<variant>_tcp)
  std::vector<std::string> allreduce_variants = {"none"};
  bool hierarchical = false;  // --hierarchical: chorus also with the hierarchy forced on and off
  std::vector<std::size_t> sizes = {4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20};
  bool steps_given = false;
#ifdef CHORUS_WITH_PIPELINE
  bench::negotiation_bench_options negotiation;
  bool processes = false;
  bench::autotune_bench_options autotune;
#endif
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "chorus-bench: %s\n"
               "usage: chorus-bench allreduce [--impl chorus|gloo|floor|both|all] [--sizes 4K,64K,1M,16M,64M]\n"
               "                              [--streams S] [--chunk-bytes B] [--segment-bytes B] [--hierarchical]\n"
               "                              [--variants none,fp16,bf16,nancheck]\n"
               "       chorus-bench allgather [--sizes 4K,64M] [--streams S] [--chunk-bytes B] [--segment-bytes B]\n"
               "       chorus-bench pipeline [--steps K] [--compute-us U] [--metrics] [--trace] [--fp16] [--nancheck]\n"
               "       chorus-bench negotiation --ranks N --strategy gossip|central --link-latency-us L [--cycles K]\n"
               "                                [--tensors T] [--threads X] [--busy-poll]   (one process)\n"
               "       chorus-bench negotiation --processes [--strategy S] [--cycles K] [--gap-us G] [--cycle-time-us C]\n"
               "       chorus-bench autotune [--steps K] [--grid-steps G] [--max-steps M] [--cost-steps C]\n"
               "                             [--compute-us U] [--grid-streams 1,2,4,8] [--grid-chunks 256K,1M,4M]\n"
               "                             [--grid-fusion 1M,8M,64M] [--retune-signal FILE]\n"
               "       chorus-bench demo\n"
               "Run under chorusrun, e.g. chorusrun -np 2 -- chorus-bench allreduce\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  if (argc < 2) usage("missing mode");
  options o;
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--impl") o.impl = value();
    else if (a == "--sizes") o.sizes = bench::parse_sizes(value());
    else if (a == "--variants") o.allreduce_variants = split_variants(value());
    else if (a == "--streams") setenv("CHORUS_NUM_STREAMS", value().c_str(), 1);
    else if (a == "--chunk-bytes") setenv("CHORUS_CHUNK_BYTES", value().c_str(), 1);
    else if (a == "--segment-bytes") setenv("CHORUS_SEGMENT_BYTES", value().c_str(), 1);
    else if (a == "--hierarchical") o.hierarchical = true;
    else if (a == "--metrics") o.variants.push_back("metrics");
    else if (a == "--trace") o.variants.push_back("trace");
    else if (a == "--fp16") o.variants.push_back("fp16");
    else if (a == "--nancheck") o.variants.push_back("nancheck");
    else if (a == "--steps") o.steps = std::stoi(value()), o.steps_given = true;
    else if (a == "--compute-us") o.compute_us = std::stol(value());
#ifdef CHORUS_WITH_PIPELINE
    else if (a == "--ranks") o.negotiation.ranks = std::stoi(value());
    else if (a == "--strategy") o.negotiation.strategy = value();
    else if (a == "--link-latency-us") o.negotiation.link_latency_us = std::stol(value());
    else if (a == "--cycles") o.negotiation.cycles = std::stoi(value());
    else if (a == "--tensors") o.negotiation.tensors = std::stoi(value());
    else if (a == "--threads") o.negotiation.threads = std::stoi(value());
    else if (a == "--busy-poll") o.negotiation.busy_poll = true;
    else if (a == "--gap-us") o.negotiation.gap_us = std::stol(value());
    else if (a == "--cycle-time-us") o.negotiation.cycle_time_us = std::stol(value());
    else if (a == "--processes") o.processes = true;
    else if (a == "--grid-steps") o.autotune.grid_steps = std::stoi(value());
    else if (a == "--max-steps") o.autotune.max_steps = std::stoi(value());
    else if (a == "--cost-steps") o.autotune.cost_steps = std::stoi(value());
    else if (a == "--grid-streams") o.autotune.grid_streams = bench::parse_sizes(value());
    else if (a == "--grid-chunks") o.autotune.grid_chunks = bench::parse_sizes(value());
    else if (a == "--grid-fusion") o.autotune.grid_fusion = bench::parse_sizes(value());
    else if (a == "--retune-signal") o.autotune.retune_signal = value();
#endif
    else usage(("unknown option " + a).c_str());
  }
  if (o.impl != "chorus" && o.impl != "gloo" && o.impl != "floor" && o.impl != "both" && o.impl != "all")
    usage("--impl must be chorus, gloo, floor, both or all");
  return o;
}

// One buffer for every size and implementation, touched once before any timing.
float* pretouched_buffer(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map the benchmark buffer");
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

void check_status(const status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

// `algo` automatic: CHORUS_HIERARCHICAL decides (chorus_tcp); flat / hierarchical: forced
// (chorus_flat_tcp, chorus_hier_tcp). `variant` fp16 / bf16 / nancheck: compression on the wire
// or the NaN/Inf check, over the flat ring (chorus_<variant>_tcp).
bench::allreduce_impl chorus_impl(communicator& c, allreduce_algorithm algo = allreduce_algorithm::automatic,
                                  const std::string& variant = "none") {
  bench::allreduce_impl impl;
  impl.name = algo == allreduce_algorithm::flat           ? "chorus_flat_tcp"
              : algo == allreduce_algorithm::hierarchical ? "chorus_hier_tcp"
                                                          : "chorus_tcp";
  impl.rank = c.rank();
  impl.size = c.size();
  impl.allreduce_sum = [&c, algo](float* d, std::size_t n) {
    check_status(c.allreduce(d, n, dtype::f32, reduce_op::sum, algo), "allreduce");
  };
  // Compression on the wire (the inputs are small integers: fp16 and bf16 sums stay exact for
  // N <= 4, so every result is still checked exactly) and the NaN/Inf check.
  if (variant != "none") {
    impl.name = "chorus_" + variant + "_tcp";
    wire_options w;
    w.wire = variant == "fp16" ? compression::fp16 : variant == "bf16" ? compression::bf16 : compression::none;
    w.check = variant == "nancheck";
    if (w.check) w.report = std::make_shared<nonfinite_report>();
    impl.allreduce_sum = [&c, w](float* d, std::size_t n) {
      check_status(c.allreduce(d, n, dtype::f32, reduce_op::sum, w), "allreduce");
      if (w.report && w.report->any()) throw std::runtime_error("NaN/Inf check: finite inputs reported non-finite");
    };
  }
  impl.barrier = [&c] { check_status(c.barrier(), "barrier"); };
  impl.allreduce_max = [&c](double* d, std::size_t n) {
    check_status(c.allreduce(d, n, dtype::f64, reduce_op::max), "allreduce max");
  };
  return impl;
}

// Where the peers' sockets listen: where Chorus' data plane does (CHORUS_HOST, CHORUS_IFACE,
// else towards the rendezvous), so across emulated hosts all of them use the same network.
std::string peer_host(const process_env& env) {
  auto cfg = read_config();
  if (!cfg) throw std::runtime_error(cfg.error().to_string());
  if (!cfg->transport.host.empty()) return cfg->transport.host;
  if (!cfg->transport.iface.empty()) {
    auto addr = tcp::interface_address(cfg->transport.iface);
    if (!addr) throw std::runtime_error(addr.error().to_string());
    return *addr;
  }
  return tcp::local_address_towards(env.rendezvous_host);
}

int run_allreduce(const options& o, const process_env& env) {
  auto comm = communicator::create(env);
  if (!comm) throw std::runtime_error(comm.error().to_string());
  auto& c = **comm;
  const bool run_chorus = o.impl == "chorus" || o.impl == "both" || o.impl == "all";
  const bool run_gloo = o.impl == "gloo" || o.impl == "both" || o.impl == "all";
  const bool run_floor = o.impl == "floor" || o.impl == "all";
  std::size_t max_bytes = 0;
  for (auto s : o.sizes) max_bytes = std::max(max_bytes, s);
  float* buffer = pretouched_buffer(std::max<std::size_t>(max_bytes, 4096));
  std::vector<bench::allreduce_impl> ours;
  for (const auto& v : o.allreduce_variants) ours.push_back(chorus_impl(c, allreduce_algorithm::automatic, v));
  auto hier = chorus_impl(c, allreduce_algorithm::hierarchical);
  auto flat = chorus_impl(c, allreduce_algorithm::flat);
  if (c.rank() == 0 && o.hierarchical)
    std::printf("# hosts: %s (chorus_tcp: CHORUS_HIERARCHICAL decides; chorus_hier_tcp / chorus_flat_tcp: forced "
                "on / off)\n",
                c.hosts().describe().c_str());
  if (c.rank() == 0)
    std::printf("# chorus-bench allreduce: N=%d streams=%d chunk_bytes=%zu segment_bytes=%zu shm_streams=%d "
                "(chorus_tcp: payloads through shared-memory rings where shm_streams > 0, CHORUS_SHM_BYTES=0: "
                "TCP only)\n",
                c.size(), c.num_streams(), c.options().chunk_bytes, c.options().segment_bytes,
                c.plane().wire().links().shm_streams);
  // fp16/bf16 variants among ranks that all share memory run uncompressed (CHORUS_COMPRESSION_SHM).
  const bool asks_compression = std::any_of(o.allreduce_variants.begin(), o.allreduce_variants.end(),
                                            [](const std::string& v) { return v == "fp16" || v == "bf16"; });
  if (c.rank() == 0 && asks_compression) std::printf("# compression: %s\n", c.wire_compression().describe().c_str());
#ifdef CHORUS_WITH_GLOO
  std::unique_ptr<bench::gloo_peer> gloo;
  bench::allreduce_impl theirs;
  char dir[128];
  std::snprintf(dir, sizeof dir, "/tmp/chorus-bench-gloo-%016llx", static_cast<unsigned long long>(env.job_id));
  if (run_gloo) {
    gloo = bench::gloo_peer::connect(env.rank, env.size, dir, peer_host(env));
    if (!gloo) throw std::runtime_error("Gloo rendezvous failed");
    theirs.name = "gloo_tcp";
    theirs.rank = env.rank;
    theirs.size = env.size;
    theirs.allreduce_sum = [&](float* d, std::size_t n) { gloo->allreduce_sum(d, n); };
    theirs.barrier = [&] { gloo->barrier(); };
    theirs.allreduce_max = [&](double* d, std::size_t n) { gloo->allreduce_max(d, n); };
  }
#else
  if (o.impl == "gloo") throw std::runtime_error("chorus-bench was built without Gloo (libgloo-dev)");
#endif
  std::unique_ptr<bench::tcp_floor> floor;
  bench::allreduce_impl bare;
  if (run_floor) {
    floor = bench::tcp_floor::connect(c, peer_host(env));
    if (!floor && c.rank() == 0) std::printf("# tcp_floor: measured with 2 ranks only, skipped\n");
    bare.name = "tcp_floor";
    bare.rank = c.rank();
    bare.size = c.size();
    bare.allreduce_sum = [&](float* d, std::size_t n) { floor->allreduce_sum(d, n); };
    bare.barrier = [&] { floor->barrier(); };
    bare.allreduce_max = [&](double* d, std::size_t n) { floor->allreduce_max(d, n); };
  }
  auto report = [&](const bench::allreduce_impl& impl, std::size_t bytes) {
    auto r = bench::measure(impl, buffer, bytes);
    if (c.rank() == 0) std::printf("%s\n", bench::result_line(impl, r).c_str()), std::fflush(stdout);
  };
  // Sizes interleave the implementations so that all see the same machine noise.
  for (auto bytes : o.sizes) {
    if (run_chorus)
      for (const auto& impl : ours) report(impl, bytes);
    if (run_chorus && o.hierarchical) {
      report(hier, bytes);
      report(flat, bytes);
    }
#ifdef CHORUS_WITH_GLOO
    if (gloo) report(theirs, bytes);
#endif
    if (floor) report(bare, bytes);
  }
#ifdef CHORUS_WITH_GLOO
  if (gloo) {
    gloo->barrier();
    gloo.reset();
    if (env.rank == 0) {
      std::string cmd = std::string("rm -rf '") + dir + "'";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
    }
  }
#endif
  check_status(c.barrier(), "final barrier");
  return 0;
}

int run_demo(const process_env& env) {
  auto t0 = std::chrono::steady_clock::now();
  auto comm = communicator::create(env);
  if (!comm) throw std::runtime_error(comm.error().to_string());
  auto& c = **comm;
  double setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank %d of %d: connected to %d peer(s) over %d authenticated TCP streams each in %.1f ms; "
              "%d of those streams carry their payloads through shared memory\n",
              c.rank(), c.size(), c.size() - 1, c.num_streams(), setup_ms, c.plane().wire().links().shm_streams);
  std::fflush(stdout);
  check_status(c.barrier(), "barrier");

  // Broadcast a "model" from rank 0 and gather one number from everybody.
  std::vector<int32_t> model(1000, c.rank() == 0 ? 42 : 0);
  check_status(c.broadcast(model.data(), model.size(), dtype::i32, 0), "broadcast");
  std::vector<int32_t> ranks(c.size());
  int32_t mine = c.rank();
  check_status(c.allgather(&mine, ranks.data(), std::vector<std::size_t>(c.size(), 1), dtype::i32), "allgather");
  bool ok = model[999] == 42;
  for (int r = 0; r < c.size(); ++r) ok &= ranks[r] == r;
  if (!ok) throw std::runtime_error("broadcast/allgather gave wrong results");
  if (c.rank() == 0) std::printf("broadcast of 1000 ints from rank 0 and allgather of ranks: exact\n");

  auto impl = chorus_impl(c);
  float* buffer = pretouched_buffer(64u << 20);
  if (c.rank() == 0) std::printf("allreduce (float32 sum, in place; time = max over ranks):\n");
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{64} << 20}) {
    auto r = bench::measure(impl, buffer, bytes);
    if (c.rank() == 0)
      std::printf("  %8zu bytes: median %9.1f us, busbw %6.3f GB/s over %d checked iterations\n", bytes, r.median_us,
                  r.busbw_gbps, r.iterations);
    std::fflush(stdout);
  }
  check_status(c.barrier(), "barrier");
  if (c.rank() == 0) std::printf("demo done: every result checked\n");
  return 0;
}

}  // namespace

#ifdef CHORUS_WITH_PIPELINE
// A rank with its control link, for the benchmarks that start a pipeline.
static connected_rank connect_rank(const process_env& env) {
  auto cfg = read_config();
  if (!cfg) throw std::runtime_error(cfg.error().to_string());
  auto joined = communicator::connect(env, *cfg);
  if (!joined) throw std::runtime_error(joined.error().to_string());
  return std::move(*joined);
}
#endif

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
#ifdef CHORUS_WITH_PIPELINE
  if (o.mode == "negotiation" && !o.processes) {  // one process, no job environment
    try {
      return bench::run_negotiation_bench(o.negotiation);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "chorus-bench: %s\n", e.what());
      return 1;
    }
  }
#endif
  auto env = read_process_env();
  if (!env) {
    std::fprintf(stderr, "chorus-bench: %s\n", env.error().to_string().c_str());
    return 1;
  }
  try {
    if (o.mode == "allreduce") return run_allreduce(o, *env);
    if (o.mode == "demo") return run_demo(*env);
    if (o.mode == "allgather") {
      auto comm = communicator::create(*env);
      if (!comm) throw std::runtime_error(comm.error().to_string());
      return bench::run_allgather_bench(**comm, o.sizes);
    }
    if (o.mode == "pipeline") {
#ifdef CHORUS_WITH_PIPELINE
      auto joined = connect_rank(*env);
      return bench::run_pipeline_bench(*joined.comm, std::move(joined.control), o.steps, std::chrono::microseconds(o.compute_us), o.variants);
#else
      throw std::runtime_error("chorus-bench was built without the actor pipeline (CHORUS_WITH_PIPELINE=OFF)");
#endif
    }
    if (o.mode == "autotune") {
#ifdef CHORUS_WITH_PIPELINE
      auto a = o.autotune;
      if (o.steps_given) a.steps = o.steps;
      a.compute = std::chrono::microseconds(o.compute_us);
      return bench::run_autotune_bench(*env, a);
#else
      throw std::runtime_error("chorus-bench was built without the actor pipeline (CHORUS_WITH_PIPELINE=OFF)");
#endif
    }
    if (o.mode == "negotiation") {
#ifdef CHORUS_WITH_PIPELINE
      auto joined = connect_rank(*env);
      return bench::run_negotiation_processes_bench(*joined.comm, std::move(joined.control), o.negotiation);
#else
      throw std::runtime_error("chorus-bench was built without the actor pipeline (CHORUS_WITH_PIPELINE=OFF)");
#endif
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-bench: rank %d: %s\n", env->rank, e.what());
    return 1;
  }
  usage(("unknown mode " + o.mode).c_str());
}
