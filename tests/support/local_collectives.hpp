// One collective (ring allreduce, recursive doubling, chain broadcast, ring allgather) on every
// rank of a deterministic local fabric, for the collectives' local tests: each rank's buffer, what
// it should hold afterwards (reference: tests/support/reduce_reference.hpp) and what `done`
// reported, and the ranks' engines on one fabric. Shared by collectives_local_test.cpp and
// collectives_local_failures_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/exchange_op.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/transport/local/local_transport.hpp"
#include "tests/support/reduce_reference.hpp"

namespace chorus::testing {

// ---- one collective on every rank -------------------------------------------------------------

enum class algo { ring_allreduce, recursive_doubling, broadcast, ring_allgather };
inline const algo all_algos[] = {algo::ring_allreduce, algo::recursive_doubling, algo::broadcast, algo::ring_allgather};

inline const char* name_of(algo a) {
  switch (a) {
    case algo::ring_allreduce: return "ring_allreduce";
    case algo::recursive_doubling: return "recursive_doubling";
    case algo::broadcast: return "broadcast";
    case algo::ring_allgather: return "ring_allgather";
  }
  return "?";
}

struct op_spec {
  algo kind = algo::ring_allreduce;
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;
  std::size_t count = 0;          // elements (allgather: rank r contributes count + r % 3)
  std::size_t segment_bytes = 4;
  int root = 0;
  uint64_t sequence = 0;
  int stream = 0;
};

inline std::string describe(const op_spec& s, int n) {
  return std::string(name_of(s.kind)) + " n=" + std::to_string(n) + " " + std::string(name_of(s.type)) + " " +
         std::string(name_of(s.op)) + " count=" + std::to_string(s.count) + " segment=" +
         std::to_string(s.segment_bytes) + " root=" + std::to_string(s.root) + " seq=" + std::to_string(s.sequence) +
         " stream=" + std::to_string(s.stream);
}

// Every rank's buffer of one op, what it should hold afterwards, and what `done` reported.
struct collective_case {
  op_spec spec;
  int n = 0;
  std::vector<std::vector<std::byte>> buf, expected;
  std::vector<std::vector<std::size_t>> counts;  // allgather: each rank's view of the counts
  std::vector<int> calls;
  std::vector<status> result;

  collective_case(const op_spec& s, int size, std::mt19937_64& rng) : spec(s), n(size), calls(size, 0), result(size) {
    const std::size_t e = size_of(s.type);
    std::vector<std::size_t> c(n, s.count);
    if (s.kind == algo::ring_allgather)
      for (int r = 0; r < n; ++r) c[r] = s.count + r % 3;
    counts.assign(n, c);
    std::size_t total = s.count;
    if (s.kind == algo::ring_allgather) total = std::accumulate(c.begin(), c.end(), std::size_t{0});
    buf.assign(n, std::vector<std::byte>(total * e, std::byte{0xEE}));
    expected.assign(n, std::vector<std::byte>(total * e));
    std::vector<const std::byte*> in;
    for (int r = 0; r < n; ++r) {
      if (s.kind == algo::ring_allgather) {
        std::size_t at = 0;
        for (int b = 0; b < r; ++b) at += c[b];
        fill_input(s.type, s.op, buf[r].data() + at * e, c[r], rng);
        if (c[r]) std::memcpy(expected[0].data() + at * e, buf[r].data() + at * e, c[r] * e);
      } else if (s.kind != algo::broadcast || r == s.root) {
        fill_input(s.type, s.op, buf[r].data(), s.count, rng);
      }
      in.push_back(buf[r].data());
    }
    if (s.kind == algo::broadcast) expected[0] = buf[s.root];
    if (s.kind == algo::ring_allreduce || s.kind == algo::recursive_doubling)
      reference(s.type, s.op, in, expected[0].data(), s.count);
    for (int r = 1; r < n; ++r) expected[r] = expected[0];
  }

  std::unique_ptr<chunk_op> make(int r) {
    const auto& s = spec;
    switch (s.kind) {
      case algo::ring_allreduce:
        return make_ring_allreduce(s.sequence, s.stream, r, n, buf[r].data(), s.count, s.type, s.op, s.segment_bytes);
      case algo::recursive_doubling:
        return std::make_unique<exchange_op>(s.sequence, s.stream, r, n, buf[r].data(), s.count, s.type, s.op);
      case algo::broadcast:
        return std::make_unique<broadcast_op>(s.sequence, s.stream, r, n, buf[r].data(), buf[r].size(), s.root,
                                              s.segment_bytes);
      case algo::ring_allgather:
        return make_ring_allgather(s.sequence, s.stream, r, n, buf[r].data(), counts[r], s.type, s.segment_bytes);
    }
    return nullptr;
  }

  engine::done_fn done(int r) {
    return [this, r](const status& st) {
      ++calls[r];
      result[r] = st;
    };
  }

  // Each rank's done ran exactly once, successfully, and left the expected bytes.
  void expect_success() const {
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(describe(spec, n) + " rank=" + std::to_string(r));
      EXPECT_EQ(calls[r], 1);
      EXPECT_TRUE(result[r].ok()) << result[r].to_string();
      if (buf[r] == expected[r]) continue;
      std::size_t e = size_of(spec.type), i = 0;
      while (std::memcmp(buf[r].data() + i * e, expected[r].data() + i * e, e) == 0) ++i;
      ADD_FAILURE() << "element " << i << " differs"
                    << (is_float(spec.type) ? ": got " + std::to_string(load_float(spec.type, buf[r].data(), i)) +
                                                  ", expected " +
                                                  std::to_string(load_float(spec.type, expected[r].data(), i))
                                            : std::string());
    }
  }
};

// ---- ranks on one fabric ----------------------------------------------------------------------

struct cluster {
  cluster(int n, int streams, uint64_t seed, bool threaded = false)
      : fabric(local::fabric_options{n, streams, 0xC0DE, 64u << 20, threaded,
                                     local::random_delay(seed, std::chrono::nanoseconds{1000})}) {
    for (int r = 0; r < n; ++r) engines.push_back(std::make_unique<engine>(fabric.endpoint(r)));
    for (int r = 0; r < n; ++r) fabric.endpoint(r).start(engines[r].get());
  }
  ~cluster() { fabric.stop(); }  // before the engines go: no task may reach them afterwards
  int size() const { return fabric.size(); }
  void start(collective_case& k, int r) { engines[r]->run(k.make(r), k.done(r)); }

  local::local_fabric fabric;
  std::vector<std::unique_ptr<engine>> engines;
};

}  // namespace chorus::testing
