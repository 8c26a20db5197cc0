// ledger_strategy: the calls that feed the ledger and let the strategy advance.
#include "runtime/negotiation/ledger_strategy.hpp"

#include <utility>

namespace chorus::negotiation {

actions ledger_strategy::local_ready(tensor_spec spec, time_point now) {
  actions out;
  ledger_.local_ready(std::move(spec), out);
  advance(now, out);
  return out;
}

actions ledger_strategy::local_ready_all(std::vector<tensor_spec> specs, time_point now) {
  actions out;
  for (auto& spec : specs) ledger_.local_ready(std::move(spec), out);
  advance(now, out);
  return out;
}

actions ledger_strategy::submit_score(double score, uint64_t digest, time_point now) {
  actions out;
  ledger_.submit_score(score, digest);
  advance(now, out);
  return out;
}

actions ledger_strategy::request_shutdown(time_point now) {
  actions out;
  ledger_.request_shutdown();
  advance(now, out);
  return out;
}

actions ledger_strategy::request_join(time_point now) {
  actions out;
  ledger_.request_join();
  advance(now, out);
  return out;
}

actions ledger_strategy::on_timer(time_point now) {
  actions out;
  ledger_.on_timer(now);
  advance(now, out);
  return out;
}

}  // namespace chorus::negotiation
