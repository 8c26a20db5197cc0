// observer_from_config: each telemetry part is built from its configuration; the parts are fanned out.
#include "telemetry/setup.hpp"

#include <vector>

#include "telemetry/metrics/metrics_observer.hpp"
#include "telemetry/trace/recorder.hpp"

namespace chorus::telemetry {

result<std::shared_ptr<observer>> observer_from_config(const context& ctx, const telemetry_config& c) {
  std::vector<std::shared_ptr<observer>> parts;
  auto metrics = metrics_from_config(ctx, c);
  if (!metrics) return metrics.error();
  parts.push_back(std::move(*metrics));
  auto trace = trace::trace_from_config(ctx, c);
  if (!trace) return trace.error();
  parts.push_back(std::move(*trace));
  return fan_out(std::move(parts));
}

}  // namespace chorus::telemetry
