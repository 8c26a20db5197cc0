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

// clang-format off
constexpr std::array table{
  // ---- data plane (transport) ----
  variable{"CHORUS_NUM_STREAMS", "", kind::whole, "8", 1, 64, "",
           "TCP connections (streams) to each peer", owner::config, "connections"},
  variable{"CHORUS_SOCKET_BUFFER_BYTES", "", kind::whole, "0", 0, GiB, "",
           "SO_SNDBUF / SO_RCVBUF of every stream; 0 keeps the kernel's autotuning", owner::config, "bytes"},
  variable{"CHORUS_SHM_BYTES", "", kind::whole, "2097152", 0, GiB, "",
           "shared-memory ring per stream and direction to each rank on the same host; 0 = TCP only",
           owner::config, "bytes"},
  variable{"CHORUS_SHM_SPIN_US", "", kind::whole, "50", 0, 1000000, "",
           "with shared-memory rings, the I/O thread polls them this long after its last work before it "
           "sleeps (a sleeping receiver costs the next frame a doorbell on TCP); 0 = sleep at once",
           owner::config, "microseconds"},
  variable{"CHORUS_HOST", "", kind::text, "", 0, 0, "an address",
           "address this rank listens on for data; empty: the address towards the rendezvous", owner::config, ""},
  variable{"CHORUS_IFACE", "", kind::text, "", 0, 0, "a network interface name",
           "interface whose address this rank listens on, like GLOO_SOCKET_IFNAME", owner::config, ""},
  variable{"CHORUS_HOST_ID", "", kind::text, "", 0, 0, "any text",
           "overrides host identity used to decide which ranks share memory", owner::config, ""},
  variable{"CHORUS_CONNECT_TIMEOUT_SECONDS", "", kind::decimal, "60", 0.001, 86400, "",
           "building the data plane's mesh and the control plane's connections", owner::config, "seconds"},
  variable{"CHORUS_PEER_TIMEOUT_SECONDS", "", kind::whole, "30", 1, 86400, "",
           "a peer silent this long is declared lost", owner::config, "seconds"},
  // ---- collectives ----
  variable{"CHORUS_CHUNK_BYTES", "", kind::whole, "4194304", 1024, 64 * MiB, "",
           "a buffer is cut into chunks of this size, spread over the streams (not a bucket the pipeline's direct "
           "path on one host takes whole)",
           owner::config, "bytes"},
  variable{"CHORUS_SEGMENT_BYTES", "", kind::whole, "524288", 1024, 64 * MiB, "",
           "pipelining unit inside a chunk's ring steps", owner::config, "bytes"},
  variable{"CHORUS_SMALL_ALLREDUCE_BYTES", "", kind::whole, "65536", 0, 64 * MiB, "",
           "allreduces up to this size use recursive doubling (latency)", owner::config, "bytes"},
  variable{"CHORUS_CALLER_ALLREDUCE_BYTES", "", kind::whole, "4194304", 0, 1 << 30, "",
           "with every rank on one host, blocking allreduces run on the calling thread, and the pipeline's "
           "allreduce chunks on a thread of their own, through shared-memory mailboxes: always with two ranks, "
           "else while bytes x (ranks - 2) <= this; 0 = never",
           owner::config, "bytes"},
  variable{"CHORUS_HIERARCHICAL", "HOROVOD_HIERARCHICAL_ALLREDUCE", kind::choice, "auto", 0, 0, "auto|on|off|1|0",
           "hierarchical allreduce (inside hosts, then across): auto by size and topology, on, off; 1 = on, 0 = off",
           owner::config, "", "1=on|0=off"},
  variable{"CHORUS_REDUCE_KERNELS", "", kind::choice, "auto", 0, 0, "auto|portable",
           "reduction loops: auto picks AVX2+F16C where the CPU has them; portable forces the baseline",
           owner::config, ""},
  variable{"CHORUS_COMPRESSION", "", kind::choice, "none", 0, 0, "none|fp16|bf16",
           "job default for float32/float64 allreduce, reducescatter, allgather: cast to fp16/bf16 on the wire",
           owner::config, ""},
  variable{"CHORUS_COMPRESSION_SHM", "", kind::choice, "auto", 0, 0, "auto|on",
           "fp16/bf16 among ranks that all reach each other through shared memory: auto runs such ops "
           "uncompressed (the casts cost more than the bytes they save), on compresses anyway",
           owner::config, ""},
  variable{"CHORUS_NAN_CHECK", "", kind::choice, "off", 0, 0, "off|error|skip",
           "job default NaN/Inf check of float inputs: error fails the op on every rank; skip flags it on every rank",
           owner::config, ""},
  // ---- pipeline and negotiation ----
  variable{"CHORUS_NEGOTIATION", "", kind::choice, "gossip", 0, 0, "gossip|central",
           "negotiation strategy: gossip (no root) or central (rank 0 decides)", owner::config, ""},
  variable{"CHORUS_GPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS", kind::choice, "nccl", 0, 0, "nccl|host",
           "CUDA tensors: nccl (NCCL where every rank has a GPU of its own, else host staging) or host "
           "(always copy to pinned host memory and use the CPU data plane)",
           owner::config, ""},
  variable{"CHORUS_CYCLE_TIME_MS", "HOROVOD_CYCLE_TIME", kind::decimal, "1", 0, 60000, "",
           "least time between a rank's cycle starts (gossip: sooner when a fusion threshold's worth of bytes waits)", owner::config,
           "milliseconds"},
  variable{"CHORUS_EARLY_START", "", kind::choice, "0", 0, 0, "0|1",
           "1: a rank that caught up with what its peers wait for starts a cycle at once", owner::config, ""},
  variable{"CHORUS_HOLD_WHEN_AHEAD", "", kind::choice, "1", 0, 0, "0|1",
           "1: a rank ahead of its peers starts no cycle for new tensors; it joins the peers' next cycle",
           owner::config, ""},
  variable{"CHORUS_DYNAMIC_PROCESS_SETS", "HOROVOD_DYNAMIC_PROCESS_SETS", kind::choice, "0", 0, 0, "0|1",
           "1: process sets may be added and removed after init (add_process_set, remove_process_set)",
           owner::config, ""},
  variable{"CHORUS_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", kind::whole, "67108864", 0, two_pow_34, "",
           "largest fused bucket; with gossip, this many bytes waiting start a cycle without waiting out the cycle time",
           owner::config, "bytes"},
  variable{"CHORUS_IN_PLACE_BYTES", "", kind::whole, "1048576", 0, two_pow_34, "",
           "allreduce tensors at least this large are reduced in place, not fused; 0 = fuse everything (two ranks "
           "on one host: plain allreduces on the direct path fuse whatever their size)",
           owner::config, "bytes"},
  variable{"CHORUS_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS", kind::whole, "60", 0, two_pow_30,
           "", "warn about tensors some ranks have not submitted after this long; 0 = off", owner::config, "seconds"},
  variable{"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", kind::whole, "0", 0,
           two_pow_30, "", "stop the job when a tensor stalls this long; 0 = off", owner::config, "seconds"},
  variable{"CHORUS_SCHEDULER_THREADS", "", kind::whole, "1", 1, 256, "",
           "CAF worker threads of the actor pipeline", owner::config, "threads"},
  variable{"CHORUS_SCHEDULER_BATCH", "", kind::choice, "1", 0, 0, "0|1",
           "1: the actor pipeline's threads run under Linux's SCHED_BATCH policy: a woken actor takes an idle core "
           "at once but does not preempt a busy one (the data plane's or the framework's thread) before its time "
           "slice ends; 0: the default policy",
           owner::config, ""},
  variable{"CHORUS_START_WINDOW", "", kind::whole, "16", 1, 1 << 20, "",
           "how far (in chunks) a rank may start ahead of its oldest unfinished chunk", owner::config, "chunks"},
  variable{"CHORUS_CHUNKS_IN_FLIGHT", "", kind::whole, "2", 1, 1024, "",
           "chunks one sender runs at once", owner::config, "chunks"},
  variable{"CHORUS_STREAM_PLACEMENT", "", kind::choice, "speed", 0, 0, "speed|round_robin",
           "which stream a chunk goes to: speed (earliest expected finish by observed rate) or round_robin",
           owner::config, ""},
  // ---- autotuner (docs/autotune.md) ----
  variable{"CHORUS_AUTOTUNE", "HOROVOD_AUTOTUNE", kind::choice, "0", 0, 0, "0|1",
           "1: tune streams in use, chunk size, fusion and in-place thresholds and cycle time while the job runs",
           owner::config, ""},
  variable{"CHORUS_MAX_STREAMS", "", kind::whole, "0", 0, 64, "",
           "top of the autotuner's streams axis (streams used per peer, 1 .. this); 0 = CHORUS_NUM_STREAMS, "
           "which it may not exceed (the connections are opened at start)",
           owner::config, "streams"},
  variable{"CHORUS_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG", kind::text, "", 0, 0, "a file path",
           "rank 0 writes one CSV row per autotune sample (its settings and score) here; empty = none",
           owner::config, ""},
  variable{"CHORUS_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", kind::whole, "3", 1, 1000, "",
           "autotune samples (the start and a seeded Latin hypercube) before the Gaussian process proposes", owner::config,
           "samples"},
  variable{"CHORUS_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", kind::whole, "10", 1, 1000000,
           "", "training steps in one autotune window (a step has passed when a tensor finishes again, as in Horovod)", owner::config, "steps"},
  variable{"CHORUS_AUTOTUNE_WINDOWS_PER_SAMPLE", "", kind::whole, "3", 1, 100, "",
           "an autotune sample is the median of this many windows", owner::config, "windows"},
  variable{"CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", kind::whole, "30", 1,
           1000, "", "sample budget of the autotuner's first search", owner::config, "samples"},
  variable{"CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", kind::decimal, "0.1",
           0, 100, "", "noise added to the Gaussian process' kernel diagonal (scores normalised to unit variance)",
           owner::config, ""},
  variable{"CHORUS_AUTOTUNE_SEED", "", kind::whole, "1", 0, 4294967295.0, "",
           "seed of the autotuner's pseudo-random choices (the same on every rank)", owner::config, ""},
  variable{"CHORUS_AUTOTUNE_RETUNE_DROP", "", kind::decimal, "0.15", 0.01, 0.99, "",
           "search again when the score stays this fraction below the converged level for 3 windows",
           owner::config, ""},
  // ---- telemetry and logging ----
  variable{"CHORUS_METRICS_ADDR", "", kind::text, "127.0.0.1", 0, 0, "an address",
           "address the Prometheus endpoint listens on", owner::config, ""},
  variable{"CHORUS_METRICS_PORT", "", kind::whole, "9400", 0, 65535, "",
           "base port of the Prometheus endpoint; local rank r serves on base + r; 0 = metrics off",
           owner::config, "port"},
  variable{"CHORUS_TRACE", "", kind::text, "", 0, 0, "a directory",
           "record a trace to <dir>/rank-<r>.trace; empty = off", owner::config, ""},
  variable{"CHORUS_TRACE_MAX_MB", "", kind::whole, "256", 0, double(uint64_t{1} << 40), "",
           "bound on each trace file; 0 = no bound", owner::config, "MiB"},
  variable{"CHORUS_LOG_LEVEL", "", kind::choice, "warn", 0, 0, "error|warn|info|debug|trace",
           "log level", owner::config, ""},
  // ---- launcher: who this process is (runtime/env/process_env.cpp) ----
  variable{"CHORUS_RANK", "", kind::whole, "", 0, 2147483647, "",
           "this process's rank (else torchrun, Open MPI, PMI or Slurm variables)", owner::launcher, ""},
  variable{"CHORUS_SIZE", "", kind::whole, "", 1, 2147483647, "",
           "number of ranks in the job", owner::launcher, ""},
  variable{"CHORUS_LOCAL_RANK", "", kind::whole, "", 0, 2147483647, "",
           "rank among the processes on this host", owner::launcher, ""},
  variable{"CHORUS_LOCAL_SIZE", "", kind::whole, "", 1, 2147483647, "",
           "processes of this job on this host", owner::launcher, ""},
  variable{"CHORUS_RENDEZVOUS", "", kind::text, "", 0, 0, "host:port",
           "where rank 0 serves the rendezvous store (else MASTER_ADDR and MASTER_PORT + 1)", owner::launcher, ""},
  variable{"CHORUS_RENDEZVOUS_FD", "", kind::whole, "", 0, 2147483647, "",
           "a listening socket on the rendezvous port that rank 0 inherits and serves the store on (chorusrun sets it)",
           owner::launcher, ""},
  variable{"CHORUS_JOB_SECRET", "", kind::text, "", 0, 0, "an even number of hex digits",
           "shared secret that authenticates every connection (chorusrun sets a fresh one)", owner::launcher, ""},
  variable{"CHORUS_JOB_ID", "", kind::text, "", 0, 0, "a hex number of at most 16 digits",
           "job identity in every handshake; unset: a hash of the rendezvous address", owner::launcher, ""},
  variable{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "", kind::decimal, "60", 0.001, 1e9, "",
           "waiting for every rank at the rendezvous", owner::launcher, "seconds"},
  variable{"CHORUS_ELASTIC_WORKER", "", kind::whole, "", 0, 2147483647, "",
           "elastic jobs: this process' worker id; its rank comes from the launcher's store each round "
           "(chorusrun --min-np sets it)", owner::launcher, ""},
  variable{"CHORUS_ELASTIC_TIMEOUT_SECONDS", "HOROVOD_ELASTIC_TIMEOUT", kind::decimal, "600", 0.001, 1e9, "",
           "elastic jobs with --host-discovery-script: how long chorusrun waits below --min-np for slots "
           "(chorusrun --elastic-timeout; workers wait as long for the next round)", owner::launcher, "seconds"},
  // ---- Python ----
  variable{"CHORUS_BUCKET_BYTES", "", kind::whole, "1048576", 0, two_pow_34, "",
           "chorus.torch's DistributedOptimizer: size of its gradient buckets; 0 = one operation per gradient",
           owner::python, "bytes"},
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
