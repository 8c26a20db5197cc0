// The variable table. Defaults here are the defaults of the typed configuration (config.hpp):
// read_config() parses them with the same reader as a user's value.
#include "runtime/config/variables.hpp"

#include <array>
#include <cmath>
#include <cstdio>

namespace chorus::cfg {
namespace {

constexpr double KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
constexpr double two_pow_34 = 16 * GiB;  // 16 GiB: fusion and in-place thresholds
constexpr double two_pow_30 = GiB;

// One builder per kind, each taking only the fields its kind uses; horovod() adds an alias, and
// launcher() and python() name a reader other than config.
constexpr variable number(kind type, std::string_view name, std::string_view fallback, double min, double max,
                          std::string_view unit, std::string_view meaning) {
  return {name, "", type, fallback, min, max, "", meaning, owner::config, unit, ""};
}
constexpr variable words(kind type, std::string_view name, std::string_view fallback, std::string_view choices,
                         std::string_view meaning, std::string_view synonyms = "") {
  return {name, "", type, fallback, 0, 0, choices, meaning, owner::config, "", synonyms};
}
constexpr variable whole(std::string_view name, std::string_view fallback, double min, double max,
                         std::string_view unit, std::string_view meaning) {
  return number(kind::whole, name, fallback, min, max, unit, meaning);
}
constexpr variable decimal(std::string_view name, std::string_view fallback, double min, double max,
                           std::string_view unit, std::string_view meaning) {
  return number(kind::decimal, name, fallback, min, max, unit, meaning);
}
constexpr variable choice(std::string_view name, std::string_view fallback, std::string_view choices,
                          std::string_view meaning, std::string_view synonyms = "") {
  return words(kind::choice, name, fallback, choices, meaning, synonyms);
}
constexpr variable flag(std::string_view name, std::string_view fallback, std::string_view meaning) {
  return choice(name, fallback, "0|1", meaning);
}
constexpr variable text(std::string_view name, std::string_view fallback, std::string_view allowed,
                        std::string_view meaning) {
  return words(kind::text, name, fallback, allowed, meaning);
}
constexpr variable horovod(std::string_view alias, variable v) {
  v.alias = alias;
  return v;
}
constexpr variable launcher(variable v) {
  v.read_by = owner::launcher;
  return v;
}
constexpr variable python(variable v) {
  v.read_by = owner::python;
  return v;
}
// A launcher's rank or count: a non-negative int, no default.
constexpr variable launcher_int(std::string_view name, double min, std::string_view meaning) {
  return launcher(whole(name, "", min, 2147483647, "", meaning));
}

// clang-format off
constexpr std::array table{
  // ---- data plane (transport) ----
  whole("CHORUS_NUM_STREAMS", "8", 1, 64, "connections", "TCP connections (streams) to each peer"),
  whole("CHORUS_SOCKET_BUFFER_BYTES", "0", 0, GiB, "bytes",
        "SO_SNDBUF / SO_RCVBUF of every stream; 0 keeps the kernel's autotuning"),
  whole("CHORUS_SHM_BYTES", "2097152", 0, GiB, "bytes",
        "shared-memory ring per stream and direction to each rank on the same host; 0 = TCP only"),
  whole("CHORUS_SHM_SPIN_US", "50", 0, 1000000, "microseconds",
        "with shared-memory rings, the I/O thread polls them this long after its last work before it "
        "sleeps (a sleeping receiver costs the next frame a doorbell on TCP); 0 = sleep at once"),
  text("CHORUS_HOST", "", "an address",
       "address this rank listens on for data; empty: the address towards the rendezvous"),
  text("CHORUS_IFACE", "", "a network interface name",
       "interface whose address this rank listens on, like GLOO_SOCKET_IFNAME"),
  text("CHORUS_HOST_ID", "", "any text", "overrides host identity used to decide which ranks share memory"),
  decimal("CHORUS_CONNECT_TIMEOUT_SECONDS", "60", 0.001, 86400, "seconds",
          "building the data plane's mesh and the control plane's connections"),
  whole("CHORUS_PEER_TIMEOUT_SECONDS", "30", 1, 86400, "seconds", "a peer silent this long is declared lost"),
  // ---- collectives ----
  whole("CHORUS_CHUNK_BYTES", "4194304", 1024, 64 * MiB, "bytes",
        "a buffer is cut into chunks of this size, spread over the streams (not a bucket the pipeline's direct "
        "path on one host takes whole)"),
  whole("CHORUS_SEGMENT_BYTES", "524288", 1024, 64 * MiB, "bytes", "pipelining unit inside a chunk's ring steps"),
  whole("CHORUS_SMALL_ALLREDUCE_BYTES", "65536", 0, 64 * MiB, "bytes",
        "allreduces up to this size use recursive doubling (latency)"),
  whole("CHORUS_CALLER_ALLREDUCE_BYTES", "4194304", 0, 1 << 30, "bytes",
        "with every rank on one host, blocking allreduces run on the calling thread, and the pipeline's "
        "allreduce chunks on a thread of their own, through shared-memory mailboxes: always with two ranks, "
        "else while bytes x (ranks - 2) <= this; 0 = never"),
  horovod("HOROVOD_HIERARCHICAL_ALLREDUCE",
          choice("CHORUS_HIERARCHICAL", "auto", "auto|on|off|1|0",
                 "hierarchical allreduce (inside hosts, then across): auto by size and topology, on, off; "
                 "1 = on, 0 = off",
                 "1=on|0=off")),
  choice("CHORUS_REDUCE_KERNELS", "auto", "auto|portable",
         "reduction loops: auto picks AVX2+F16C where the CPU has them; portable forces the baseline"),
  choice("CHORUS_COMPRESSION", "none", "none|fp16|bf16",
         "job default for float32/float64 allreduce, reducescatter, allgather: cast to fp16/bf16 on the wire"),
  choice("CHORUS_COMPRESSION_SHM", "auto", "auto|on",
         "fp16/bf16 among ranks that all reach each other through shared memory: auto runs such ops "
         "uncompressed (the casts cost more than the bytes they save), on compresses anyway"),
  choice("CHORUS_NAN_CHECK", "off", "off|error|skip",
         "job default NaN/Inf check of float inputs: error fails the op on every rank; skip flags it on every rank"),
  // ---- pipeline and negotiation ----
  choice("CHORUS_NEGOTIATION", "gossip", "gossip|central",
         "negotiation strategy: gossip (no root) or central (rank 0 decides)"),
  horovod("HOROVOD_GPU_OPERATIONS",
          choice("CHORUS_GPU_OPERATIONS", "nccl", "nccl|host",
                 "CUDA tensors: nccl (NCCL where every rank has a GPU of its own, else host staging) or host "
                 "(always copy to pinned host memory and use the CPU data plane)")),
  horovod("HOROVOD_CYCLE_TIME",
          decimal("CHORUS_CYCLE_TIME_MS", "1", 0, 60000, "milliseconds",
                  "least time between a rank's cycle starts (gossip: sooner when a fusion threshold's worth of "
                  "bytes waits)")),
  flag("CHORUS_EARLY_START", "0", "1: a rank that caught up with what its peers wait for starts a cycle at once"),
  flag("CHORUS_HOLD_WHEN_AHEAD", "1",
       "1: a rank ahead of its peers starts no cycle for new tensors; it joins the peers' next cycle"),
  horovod("HOROVOD_DYNAMIC_PROCESS_SETS",
          flag("CHORUS_DYNAMIC_PROCESS_SETS", "0",
               "1: process sets may be added and removed after init (add_process_set, remove_process_set)")),
  horovod("HOROVOD_FUSION_THRESHOLD",
          whole("CHORUS_FUSION_THRESHOLD", "67108864", 0, two_pow_34, "bytes",
                "largest fused bucket; with gossip, this many bytes waiting start a cycle without waiting out "
                "the cycle time")),
  whole("CHORUS_IN_PLACE_BYTES", "1048576", 0, two_pow_34, "bytes",
        "allreduce tensors at least this large are reduced in place, not fused; 0 = fuse everything (two ranks "
        "on one host: plain allreduces on the direct path fuse whatever their size)"),
  horovod("HOROVOD_STALL_CHECK_TIME_SECONDS",
          whole("CHORUS_STALL_CHECK_TIME_SECONDS", "60", 0, two_pow_30, "seconds",
                "warn about tensors some ranks have not submitted after this long; 0 = off")),
  horovod("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
          whole("CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "0", 0, two_pow_30, "seconds",
                "stop the job when a tensor stalls this long; 0 = off")),
  whole("CHORUS_SCHEDULER_THREADS", "1", 1, 256, "threads", "CAF worker threads of the actor pipeline"),
  flag("CHORUS_SCHEDULER_BATCH", "1",
       "1: the actor pipeline's threads run under Linux's SCHED_BATCH policy: a woken actor takes an idle core "
       "at once but does not preempt a busy one (the data plane's or the framework's thread) before its time "
       "slice ends; 0: the default policy"),
  whole("CHORUS_START_WINDOW", "16", 1, 1 << 20, "chunks",
        "chunks a rank hands to its streams before the first of them ends"),
  flag("CHORUS_PRIORITY", "1",
       "1: waiting tensors go larger priority first (chorus.torch: the first layers' gradients), and a big "
       "bucket's remaining chunks yield to a later one of larger priority; 0: agreed order"),
  whole("CHORUS_CHUNKS_IN_FLIGHT", "2", 1, 1024, "chunks", "chunks one sender runs at once"),
  choice("CHORUS_STREAM_PLACEMENT", "speed", "speed|round_robin",
         "which stream a chunk goes to: speed (earliest expected finish by observed rate) or round_robin"),
  // ---- autotuner (docs/autotune.md) ----
  horovod("HOROVOD_AUTOTUNE",
          flag("CHORUS_AUTOTUNE", "0",
               "1: tune streams in use, chunk size, fusion and in-place thresholds and cycle time while the job "
               "runs")),
  whole("CHORUS_MAX_STREAMS", "0", 0, 64, "streams",
        "top of the autotuner's streams axis (streams used per peer, 1 .. this); 0 = CHORUS_NUM_STREAMS, "
        "which it may not exceed (the connections are opened at start)"),
  horovod("HOROVOD_AUTOTUNE_LOG",
          text("CHORUS_AUTOTUNE_LOG", "", "a file path",
               "rank 0 writes one CSV row per autotune sample (its settings and score) here; empty = none")),
  horovod("HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
          whole("CHORUS_AUTOTUNE_WARMUP_SAMPLES", "3", 1, 1000, "samples",
                "autotune samples (the start and a seeded Latin hypercube) before the Gaussian process "
                "proposes")),
  horovod("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
          whole("CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "10", 1, 1000000, "steps",
                "training steps in one autotune window (a step has passed when a tensor finishes again, as in "
                "Horovod)")),
  whole("CHORUS_AUTOTUNE_WINDOWS_PER_SAMPLE", "3", 1, 100, "windows",
        "an autotune sample is the median of this many windows"),
  horovod("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
          whole("CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "30", 1, 1000, "samples",
                "sample budget of the autotuner's first search")),
  horovod("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
          decimal("CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.1", 0, 100, "",
                  "noise added to the Gaussian process' kernel diagonal (scores normalised to unit variance)")),
  whole("CHORUS_AUTOTUNE_SEED", "1", 0, 4294967295.0, "",
        "seed of the autotuner's pseudo-random choices (the same on every rank)"),
  decimal("CHORUS_AUTOTUNE_RETUNE_DROP", "0.15", 0.01, 0.99, "",
          "search again when the score stays this fraction below the converged level for 3 windows"),
  // ---- telemetry and logging ----
  text("CHORUS_METRICS_ADDR", "127.0.0.1", "an address", "address the Prometheus endpoint listens on"),
  whole("CHORUS_METRICS_PORT", "9400", 0, 65535, "port",
        "base port of the Prometheus endpoint; local rank r serves on base + r; 0 = metrics off"),
  text("CHORUS_TRACE", "", "a directory", "record a trace to <dir>/rank-<r>.trace; empty = off"),
  whole("CHORUS_TRACE_MAX_MB", "256", 0, double(uint64_t{1} << 40), "MiB", "bound on each trace file; 0 = no bound"),
  choice("CHORUS_LOG_LEVEL", "warn", "error|warn|info|debug|trace", "log level"),
  // ---- launcher: who this process is (runtime/env/process_env.cpp) ----
  launcher_int("CHORUS_RANK", 0, "this process's rank (else torchrun, Open MPI, PMI or Slurm variables)"),
  launcher_int("CHORUS_SIZE", 1, "number of ranks in the job"),
  launcher_int("CHORUS_LOCAL_RANK", 0, "rank among the processes on this host"),
  launcher_int("CHORUS_LOCAL_SIZE", 1, "processes of this job on this host"),
  launcher(text("CHORUS_RENDEZVOUS", "", "host:port",
                "where rank 0 serves the rendezvous store (else MASTER_ADDR and MASTER_PORT + 1; under srun "
                "alone the step's first node and a port from the job and step ids)")),
  launcher_int("CHORUS_RENDEZVOUS_FD", 0,
               "a listening socket on the rendezvous port that rank 0 inherits and serves the store on "
               "(chorusrun sets it)"),
  launcher(text("CHORUS_JOB_SECRET", "", "an even number of hex digits",
                "shared secret that authenticates every connection (chorusrun sets a fresh one)")),
  launcher(text("CHORUS_JOB_ID", "", "a hex number of at most 16 digits",
                "job identity in every handshake; unset: a hash of the rendezvous address")),
  launcher(decimal("CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "60", 0.001, 1e9, "seconds",
                   "waiting for every rank at the rendezvous")),
  launcher_int("CHORUS_ELASTIC_WORKER", 0,
               "elastic jobs: this process' worker id; its rank comes from the launcher's store each round "
               "(chorusrun --min-np sets it)"),
  launcher(horovod("HOROVOD_ELASTIC_TIMEOUT",
                   decimal("CHORUS_ELASTIC_TIMEOUT_SECONDS", "600", 0.001, 1e9, "seconds",
                           "elastic jobs with --host-discovery-script: how long chorusrun waits below --min-np "
                           "for slots (chorusrun --elastic-timeout; workers wait as long for the next round)"))),
  // ---- Python ----
  python(whole("CHORUS_BUCKET_BYTES", "1048576", 0, two_pow_34, "bytes",
               "chorus.torch's DistributedOptimizer: size of its gradient buckets; 0 = one operation per "
               "gradient")),
  python(flag("CHORUS_OVERLAP", "0",
              "1: chorus.torch's DistributedOptimizer overlaps the next forward pass (step() does not wait; each "
              "bucket's parameters are updated when first needed), as DistributedOptimizer(overlap=True)")),
};
// clang-format on

// Variables read no more, each with why (docs/design.md, "What was tried and dropped").
constexpr std::array retired{
  retired_variable{"CHORUS_FRAME_STEALING",
                   "moving waiting frames to an idle connection measured no faster than placing chunks by "
                   "each stream's speed, which Chorus does (docs/design.md)"},
  retired_variable{"CHORUS_CONTROL_PLANE",
                   "the CAF remote actors with sealed messages measured slower than the control link, which "
                   "carries the gossip now (docs/design.md)"},
};

}  // namespace

std::span<const variable> variables() { return table; }

std::span<const retired_variable> retired_variables() { return retired; }

std::string number_text(double x) {
  char buf[64];
  if (x == std::floor(x) && std::fabs(x) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", x);
  else
    std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

const variable* find(std::string_view name) {
  for (const auto& v : table)
    if (v.name == name || (!v.alias.empty() && v.alias == name)) return &v;
  return nullptr;
}

std::string_view canonical_choice(const variable& v, std::string_view text) {
  std::string_view rest = v.synonyms;
  while (!rest.empty()) {
    auto bar = rest.find('|');
    std::string_view pair = rest.substr(0, bar);
    auto eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == text) return pair.substr(eq + 1);
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return text;
}

std::string allowed(const variable& v) {
  switch (v.type) {
    case kind::whole:
      return "a whole number in [" + number_text(v.min) + ", " + number_text(v.max) + "]";
    case kind::decimal:
      return "a number in [" + number_text(v.min) + ", " + number_text(v.max) + "]";
    case kind::choice: {
      std::string out = "one of ";
      for (char c : v.choices) out += c == '|' ? std::string(", ") : std::string(1, c);
      return out;
    }
    case kind::text: return std::string(v.choices.empty() ? std::string_view("any text") : v.choices);
  }
  return "?";
}

}  // namespace chorus::cfg
