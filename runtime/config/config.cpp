// read_config: every config-owned variable of the table, through the reader, into typed fields.
#include "runtime/config/config.hpp"

#include <cmath>
#include <mutex>
#include <set>
#include <type_traits>

#include "runtime/config/variables.hpp"
#include "runtime/core/kernel_build.hpp"

namespace chorus {
namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

// Assigns the value of `r` to `out` through `conv`, or keeps the first error in `first`.
template <class T, class Out, class Conv>
void take(status& first, result<T> r, Out& out, Conv conv) {
  if (!first.ok()) return;
  if (!r) {
    first = r.error();
    return;
  }
  out = conv(*r);
}

template <class T, class Out>
void take(status& first, result<T> r, Out& out) {
  take(first, std::move(r), out, [](const T& v) { return static_cast<Out>(v); });
}

// Reads `name` into `out` by the field's type: a bool as a 0|1 flag, an integer as a whole number,
// a floating-point field as a decimal, a string as the table's choice or text.
template <class Out>
void take(status& first, const cfg::reader& r, std::string_view name, Out& out) {
  if constexpr (std::is_same_v<Out, bool>)
    take(first, r.flag(name), out);
  else if constexpr (std::is_integral_v<Out>)
    take(first, r.whole(name), out);
  else if constexpr (std::is_floating_point_v<Out>)
    take(first, r.decimal(name), out);
  else {
    const cfg::variable* v = cfg::find(name);
    take(first, v && v->type == cfg::kind::choice ? r.choice(name) : r.text(name), out);
  }
}

// Each (name, field) pair in turn, in the order given.
inline void take_each(status&, const cfg::reader&) {}
template <class Out, class... Rest>
void take_each(status& first, const cfg::reader& r, std::string_view name, Out& out, Rest&&... rest) {
  take(first, r, name, out);
  take_each(first, r, std::forward<Rest>(rest)...);
}

}  // namespace

bool parse_log_level(std::string_view text, log::level& out) {
  static constexpr std::pair<std::string_view, log::level> words[] = {
      {"error", log::level::error}, {"warn", log::level::warn},   {"info", log::level::info},
      {"debug", log::level::debug}, {"trace", log::level::trace},
  };
  for (auto [w, l] : words)
    if (w == text) {
      out = l;
      return true;
    }
  return false;
}

std::vector<std::string_view> retired_set(const env_lookup& get) {
  std::vector<std::string_view> out;
  for (const auto& v : cfg::retired_variables()) {
    const char* value = get(std::string(v.name).c_str());
    if (value && *value) out.push_back(v.name);
  }
  return out;
}

result<config> read_config(const env_lookup& get) {
  static std::mutex warned_mu;
  static std::set<std::string_view> warned;
  for (auto name : retired_set(get)) {
    std::lock_guard lk(warned_mu);
    if (!warned.insert(name).second) continue;
    for (const auto& v : cfg::retired_variables())
      if (v.name == name) CHORUS_LOG(warn, "config", name << " is set but has no effect: it was removed (" << v.why << ")");
  }
  config c;
  cfg::reader r(get);
  status st;
  auto& t = c.transport;
  take_each(st, r, "CHORUS_NUM_STREAMS", t.num_streams, "CHORUS_SOCKET_BUFFER_BYTES", t.socket_buffer_bytes,
            "CHORUS_SHM_BYTES", t.shm_bytes);
  take(st, r.whole("CHORUS_SHM_SPIN_US"), t.shm_spin,
       [](uint64_t us) { return std::chrono::microseconds(static_cast<int64_t>(us)); });
  take_each(st, r, "CHORUS_HOST", t.host, "CHORUS_IFACE", t.iface, "CHORUS_HOST_ID", t.host_id);
  take(st, r.decimal("CHORUS_CONNECT_TIMEOUT_SECONDS"), t.connect_timeout, to_ms);
  take(st, r.whole("CHORUS_PEER_TIMEOUT_SECONDS"), t.peer_timeout,
       [](uint64_t s) { return std::chrono::milliseconds(static_cast<int64_t>(s) * 1000); });

  auto& k = c.collectives;
  take(st, r, "CHORUS_CHUNK_BYTES", k.chunk_bytes);
  k.chunk_bytes_given = r.is_set("CHORUS_CHUNK_BYTES");
  take_each(st, r, "CHORUS_SEGMENT_BYTES", k.segment_bytes, "CHORUS_SMALL_ALLREDUCE_BYTES", k.small_bytes,
            "CHORUS_CALLER_ALLREDUCE_BYTES", k.caller_bytes, "CHORUS_HIERARCHICAL", k.hierarchical,
            "CHORUS_REDUCE_KERNELS", k.reduce_kernels);
  take(st, r.choice("CHORUS_COMPRESSION"), k.wire,
       [](const std::string& w) { return parse_compression(w).value_or(compression::none); });  // held to the table
  take(st, r.choice("CHORUS_COMPRESSION_SHM"), k.wire_on_shm, [](const std::string& w) {
    return parse_shm_compression(w).value_or(shm_compression::automatic);  // held to the table
  });
  take(st, r.choice("CHORUS_NAN_CHECK"), k.check,
       [](const std::string& w) { return parse_nan_check(w).value_or(nan_check::off); });

  auto& p = c.pipeline;
  take_each(st, r, "CHORUS_NEGOTIATION", p.negotiation, "CHORUS_GPU_OPERATIONS", p.gpu_operations);
  take(st, r.decimal("CHORUS_CYCLE_TIME_MS"), p.cycle_time, [](double ms) {
    return std::chrono::microseconds(static_cast<int64_t>(std::llround(ms * 1000.0)));
  });
  take_each(st, r, "CHORUS_EARLY_START", p.early_start, "CHORUS_HOLD_WHEN_AHEAD", p.hold_when_ahead,
            "CHORUS_DYNAMIC_PROCESS_SETS", p.dynamic_process_sets, "CHORUS_FUSION_THRESHOLD", p.fusion_threshold,
            "CHORUS_IN_PLACE_BYTES", p.in_place_bytes);
  auto secs = [](uint64_t s) { return std::chrono::seconds(static_cast<int64_t>(s)); };
  take(st, r.whole("CHORUS_STALL_CHECK_TIME_SECONDS"), p.stall_check, secs);
  take(st, r.whole("CHORUS_STALL_SHUTDOWN_TIME_SECONDS"), p.stall_shutdown, secs);
  take_each(st, r, "CHORUS_SCHEDULER_THREADS", p.scheduler_threads, "CHORUS_SCHEDULER_BATCH", p.scheduler_batch,
            "CHORUS_START_WINDOW", p.start_window, "CHORUS_CHUNKS_IN_FLIGHT", p.chunks_in_flight,
            "CHORUS_STREAM_PLACEMENT", p.stream_placement, "CHORUS_PRIORITY", p.priority);

  auto& a = c.autotune;
  take_each(st, r, "CHORUS_AUTOTUNE", a.enabled, "CHORUS_MAX_STREAMS", a.max_streams, "CHORUS_AUTOTUNE_LOG",
            a.log_path, "CHORUS_AUTOTUNE_WARMUP_SAMPLES", a.warmup_samples, "CHORUS_AUTOTUNE_STEPS_PER_SAMPLE",
            a.steps_per_sample, "CHORUS_AUTOTUNE_WINDOWS_PER_SAMPLE", a.windows_per_sample,
            "CHORUS_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", a.max_samples, "CHORUS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", a.noise,
            "CHORUS_AUTOTUNE_SEED", a.seed, "CHORUS_AUTOTUNE_RETUNE_DROP", a.retune_drop);

  auto& m = c.telemetry;
  take_each(st, r, "CHORUS_METRICS_ADDR", m.metrics_address, "CHORUS_METRICS_PORT", m.metrics_port, "CHORUS_TRACE",
            m.trace_dir, "CHORUS_TRACE_MAX_MB", m.trace_max_mb);

  take(st, r.choice("CHORUS_LOG_LEVEL"), c.log_level, [](const std::string& w) {
    log::level l = log::level::warn;
    parse_log_level(w, l);  // the reader already held it to the table's words
    return l;
  });
  if (!st.ok()) return st;
  return c;
}

result<config> read_config() {
  auto c = read_config(cfg::process_lookup());
  if (c) {
    log::set_level(c->log_level);
    force_portable_kernels(c->collectives.reduce_kernels == "portable");
  }
  return c;
}

void apply_log_level(const env_lookup& get) {
  auto word = cfg::reader(get).choice("CHORUS_LOG_LEVEL");
  log::level l = log::level::warn;
  if (word) parse_log_level(*word, l);
  log::set_level(l);
}

}  // namespace chorus
