// observer_from_env: each telemetry part reads its own variables; the parts are fanned out.
#include "telemetry/setup.hpp"

#include <vector>

#include "telemetry/metrics/metrics_observer.hpp"
#include "telemetry/trace/recorder.hpp"

namespace chorus::telemetry {

result<std::shared_ptr<observer>> observer_from_env(const context& ctx, const env_lookup& get) {
  std::vector<std::shared_ptr<observer>> parts;
  auto metrics = metrics_from_env(ctx, get);
  if (!metrics) return metrics.error();
  parts.push_back(std::move(*metrics));
  auto trace = trace::trace_from_env(ctx, get);
  if (!trace) return trace.error();
  parts.push_back(std::move(*trace));
  return fan_out(std::move(parts));
}

}  // namespace chorus::telemetry
