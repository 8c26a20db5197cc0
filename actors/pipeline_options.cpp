// pipeline_options::from_env: the CHORUS_* settings of the pipeline and their HOROVOD_* aliases.
// A Chorus variable and its Horovod alias may both be set only to the same value.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "actors/pipeline.hpp"

namespace chorus {

namespace {

using lookup = std::function<const char*(const char*)>;

status bad(const char* name, const char* value, const std::string& want) {
  return {errc::config, std::string(name) + "=" + value + " is not " + want};
}

/// A non-negative decimal number (e.g. "0.5"), or nothing when unset.
result<std::optional<double>> read_number(const lookup& get, const char* name, double max) {
  const char* v = get(name);
  if (!v || !*v) return std::optional<double>{};
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v, &end);
  if (errno || *end != '\0' || !std::isfinite(d) || d < 0 || d > max)
    return bad(name, v, "a number in [0, " + std::to_string(static_cast<long long>(max)) + "]");
  return std::optional<double>{d};
}

/// A whole number in [min, max], or nothing when unset.
result<std::optional<uint64_t>> read_whole(const lookup& get, const char* name, uint64_t min, uint64_t max) {
  const char* v = get(name);
  if (!v || !*v) return std::optional<uint64_t>{};
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno || *end != '\0' || v[0] == '-' || n < min || n > max)
    return bad(name, v, "a whole number in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return std::optional<uint64_t>{n};
}

/// The value of `name`, else of `alias`; both set to different values is an error.
template <class T, class Read>
result<std::optional<T>> with_alias(const lookup& get, const char* name, const char* alias, Read read) {
  auto a = read(name);
  if (!a) return a.error();
  if (!alias) return *a;
  auto b = read(alias);
  if (!b) return b.error();
  if (*a && *b && **a != **b)
    return status{errc::config, std::string(name) + "=" + get(name) + " contradicts " + alias + "=" + get(alias) +
                                    "; set one of them"};
  return *a ? *a : *b;
}

}  // namespace

result<pipeline_options> pipeline_options::from_env() {
  return from_env([](const char* n) -> const char* { return std::getenv(n); });
}

result<pipeline_options> pipeline_options::from_env(const std::function<const char*(const char*)>& get) {
  pipeline_options o;
  if (const char* v = get("CHORUS_NEGOTIATION"); v && *v) {
    o.negotiation = v;
    if (o.negotiation != "gossip" && o.negotiation != "central")
      return bad("CHORUS_NEGOTIATION", v, "gossip or central");
  }
  if (const char* v = get("CHORUS_CONTROL_PLANE"); v && *v) {
    o.control_plane = v;
    if (o.control_plane != "tcp" && o.control_plane != "caf") return bad("CHORUS_CONTROL_PLANE", v, "tcp or caf");
  }
  if (const char* v = get("CHORUS_EARLY_START"); v && *v) {
    std::string e = v;
    if (e != "0" && e != "1") return bad("CHORUS_EARLY_START", v, "0 or 1");
    o.early_start = e == "1";
  }
  if (const char* v = get("CHORUS_HOLD_WHEN_AHEAD"); v && *v) {
    std::string e = v;
    if (e != "0" && e != "1") return bad("CHORUS_HOLD_WHEN_AHEAD", v, "0 or 1");
    o.hold_when_ahead = e == "1";
  }
  auto number = [&](double max) { return [&get, max](const char* n) { return read_number(get, n, max); }; };
  auto whole = [&](uint64_t min, uint64_t max) {
    return [&get, min, max](const char* n) { return read_whole(get, n, min, max); };
  };

  auto cycle = with_alias<double>(get, "CHORUS_CYCLE_TIME_MS", "HOROVOD_CYCLE_TIME", number(60000));
  if (!cycle) return cycle.error();
  if (*cycle) o.cycle_time = std::chrono::microseconds(static_cast<int64_t>(std::llround(**cycle * 1000)));

  auto fusion = with_alias<uint64_t>(get, "CHORUS_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", whole(0, 1ull << 34));
  if (!fusion) return fusion.error();
  if (*fusion) o.fusion_threshold = static_cast<std::size_t>(**fusion);

  auto chunk = with_alias<uint64_t>(get, "CHORUS_CHUNK_BYTES", nullptr, whole(1024, 64u << 20));
  if (!chunk) return chunk.error();
  if (*chunk) o.chunk_bytes = static_cast<std::size_t>(**chunk);

  auto in_place = with_alias<uint64_t>(get, "CHORUS_IN_PLACE_BYTES", nullptr, whole(0, 1ull << 34));
  if (!in_place) return in_place.error();
  if (*in_place) o.in_place_bytes = static_cast<std::size_t>(**in_place);

  auto stall = with_alias<uint64_t>(get, "CHORUS_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS",
                                    whole(0, 1u << 30));
  if (!stall) return stall.error();
  if (*stall) o.stall_check = std::chrono::seconds(**stall);

  auto stop = with_alias<uint64_t>(get, "CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
                                   whole(0, 1u << 30));
  if (!stop) return stop.error();
  if (*stop) o.stall_shutdown = std::chrono::seconds(**stop);

  auto threads = with_alias<uint64_t>(get, "CHORUS_SCHEDULER_THREADS", nullptr, whole(1, 256));
  if (!threads) return threads.error();
  if (*threads) o.scheduler_threads = static_cast<int>(**threads);

  auto window = with_alias<uint64_t>(get, "CHORUS_START_WINDOW", nullptr, whole(1, 1u << 20));
  if (!window) return window.error();
  if (*window) o.start_window = static_cast<std::size_t>(**window);

  auto inflight = with_alias<uint64_t>(get, "CHORUS_CHUNKS_IN_FLIGHT", nullptr, whole(1, 1024));
  if (!inflight) return inflight.error();
  if (*inflight) o.chunks_in_flight = static_cast<std::size_t>(**inflight);

  auto connect = with_alias<double>(get, "CHORUS_CONNECT_TIMEOUT_SECONDS", nullptr, number(86400));
  if (!connect) return connect.error();
  if (*connect) o.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(std::llround(**connect * 1000)));
  return o;
}

}  // namespace chorus
