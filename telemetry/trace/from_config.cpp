// trace_from_config: the recorder CHORUS_TRACE and CHORUS_TRACE_MAX_MB ask for (read by
// runtime/config).
#include "telemetry/trace/recorder.hpp"

namespace chorus::telemetry::trace {

result<std::shared_ptr<observer>> trace_from_config(const context& ctx, const telemetry_config& c) {
  if (c.trace_dir.empty()) return std::shared_ptr<observer>{};
  recorder_options o;
  o.dir = c.trace_dir;
  o.rank = ctx.rank;
  o.size = ctx.size;
  o.max_bytes = c.trace_max_mb << 20;
  auto r = recorder::open(o);
  if (!r) return r.error();
  return std::shared_ptr<observer>(std::move(*r));
}

}  // namespace chorus::telemetry::trace
