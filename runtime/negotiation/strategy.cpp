// The strategy factory (CHORUS_NEGOTIATION=gossip|central).
#include "runtime/negotiation/strategy.hpp"

#include "runtime/negotiation/central.hpp"
#include "runtime/negotiation/gossip.hpp"

namespace chorus::negotiation {

result<std::unique_ptr<negotiation_strategy>> make_strategy(std::string_view name, int rank, int size,
                                                            const negotiation_options& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return status{errc::config, "negotiation: rank " + std::to_string(rank) + " outside a job of " +
                                    std::to_string(size) + " ranks"};
  }
  if (options.cycle_time < duration::zero() || options.stall_warning_time < duration::zero() ||
      options.stall_shutdown_time < duration::zero()) {
    return status{errc::config, "negotiation: negative cycle or stall time"};
  }
  std::unique_ptr<negotiation_strategy> s;
  if (name == "gossip") {
    s = std::make_unique<gossip_negotiator>(rank, size, options);
  } else if (name == "central") {
    s = std::make_unique<central_negotiator>(rank, size, options);
  } else {
    return status{errc::config, "negotiation: unknown strategy '" + std::string(name) +
                                    "' (CHORUS_NEGOTIATION must be gossip or central)"};
  }
  return s;
}

}  // namespace chorus::negotiation
