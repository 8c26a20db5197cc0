// trace_from_config: the recorder CHORUS_TRACE and CHORUS_TRACE_MAX_MB ask for (read by
// runtime/config). A file that cannot be created (a symlink planted at its path, a read-only
// directory) turns recording off with a warning.
#include "runtime/core/log.hpp"
#include "telemetry/trace/recorder.hpp"

namespace chorus::telemetry::trace {

result<std::shared_ptr<observer>> trace_from_config(const context& ctx, const telemetry_config& c) {
  if (c.trace_dir.empty()) return std::shared_ptr<observer>{};
  recorder_options o;
  o.dir = c.trace_dir;
  o.prefix = ctx.trace_prefix;
  o.rank = ctx.rank;
  o.size = ctx.size;
  o.max_bytes = c.trace_max_mb << 20;
  auto r = recorder::open(o);
  if (!r) {
    // As with the size bound: recording stops with one warning, training goes on.
    CHORUS_LOG(warn, "trace", r.error().message() << "; not recording");
    return std::shared_ptr<observer>{};
  }
  return std::shared_ptr<observer>(std::move(*r));
}

}  // namespace chorus::telemetry::trace
