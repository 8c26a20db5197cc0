// trace_from_env: CHORUS_TRACE and CHORUS_TRACE_MAX_MB. A file that cannot be created
// (a symlink planted at its path, a read-only directory) turns recording off with a warning.
#include <charconv>
#include <string_view>

#include "runtime/core/log.hpp"
#include "telemetry/trace/recorder.hpp"

namespace chorus::telemetry::trace {

result<std::shared_ptr<observer>> trace_from_env(const context& ctx, const env_lookup& get) {
  const char* dir = get ? get("CHORUS_TRACE") : nullptr;
  if (!dir || !*dir) return std::shared_ptr<observer>{};
  recorder_options o;
  o.dir = dir;
  o.rank = ctx.rank;
  o.size = ctx.size;
  uint64_t mb = default_max_mb;
  if (const char* v = get("CHORUS_TRACE_MAX_MB"); v && *v) {
    std::string_view s(v);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), mb);
    if (ec != std::errc{} || end != s.data() + s.size() || mb > (uint64_t{1} << 40))
      return status{errc::config, "CHORUS_TRACE_MAX_MB='" + std::string(s) +
                                      "': expected a whole number of MiB (0 = no bound, default " +
                                      std::to_string(default_max_mb) + ")"};
  }
  o.max_bytes = mb << 20;
  auto r = recorder::open(o);
  if (!r) {
    // As with the size bound: recording stops with one warning, training goes on.
    CHORUS_LOG(warn, "trace", r.error().message() << "; not recording");
    return std::shared_ptr<observer>{};
  }
  return std::shared_ptr<observer>(std::move(*r));
}

}  // namespace chorus::telemetry::trace
