// Test helper for the negotiation tests that drive a strategy through the scale simulator
// (runtime/negotiation/simulator.hpp): tensor specs in one call, and a simulator of N ranks
// with every message through the codec and one-way latencies of 1-80 µs (deliveries in a
// random order, drawn from the seed).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/negotiation/simulator.hpp"

namespace chorus::testing {

/// A CPU tensor of the global process set; an allreduce (sum) of f32 unless told otherwise.
inline tensor_spec spec(std::string name, std::vector<int64_t> shape, dtype type = dtype::f32,
                        collective_kind kind = collective_kind::allreduce, reduce_op op = reduce_op::sum,
                        int root = -1) {
  return tensor_spec{std::move(name), kind, type, std::move(shape), op, root, device_kind::cpu, 0};
}

/// `n` ranks of `strategy` ("gossip" or "central") with options `nego`, messages through the
/// codec, latencies uniform in [1, 80] µs drawn from `seed`. A failed creation fails the test.
inline std::unique_ptr<negotiation::simulator> make_sim(const std::string& strategy, int n, uint64_t seed,
                                                        negotiation::negotiation_options nego = {}) {
  negotiation::simulator_options o;
  o.strategy = strategy;
  o.negotiation = nego;
  o.min_latency = std::chrono::microseconds(1);
  o.max_latency = std::chrono::microseconds(80);
  o.seed = seed;
  o.through_codec = true;
  auto sim = negotiation::simulator::create(n, o);
  EXPECT_TRUE(sim.ok()) << sim.error().to_string();
  return std::move(sim.value());
}

}  // namespace chorus::testing
