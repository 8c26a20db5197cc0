// One collective suite through the transport interface, over each data plane: the in-process
// fabric (threaded), the mesh with TCP links only, and the mesh with shared-memory links
// (rings small enough that big frames still go on TCP beside them). Three ranks, each with its
// own engine on its transport; ring allreduce, recursive doubling, broadcast and ring allgather
// at sizes from empty to many segments, on two streams, several ops in flight at once; every
// result checked against an independent reference. The links the mesh chose are asserted too.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <asio.hpp>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/exchange_op.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/transport/local/local_transport.hpp"
#include "runtime/transport/mesh/mesh_transport.hpp"
#include "tests/support/mesh_ranks.hpp"
#include "tests/support/reduce_reference.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using namespace chorus::testing;

constexpr int ranks = 3;
constexpr int streams = 2;

enum class plane { local, mesh_tcp, mesh_shm };
const char* name_of(plane p) {
  switch (p) {
    case plane::local: return "local";
    case plane::mesh_tcp: return "mesh_tcp";
    case plane::mesh_shm: return "mesh_shm";
  }
  return "?";
}


// Three ranks of one data plane, each transport started with its own engine.
struct job {
  std::unique_ptr<local::local_fabric> fabric;
  std::unique_ptr<testing::mesh_ranks> mesh;
  std::unique_ptr<engine> engines[ranks];
  std::string error;

  explicit job(plane p) {
    if (p == plane::local) {
      local::fabric_options o;
      o.size = ranks;
      o.num_streams = streams;
      o.threaded = true;
      fabric = std::make_unique<local::local_fabric>(o);
    } else {
      mesh = std::make_unique<testing::mesh_ranks>(ranks, "transport-suite-secret", 0x7e57, [p](int) {
        mesh::mesh_options opts;
        opts.connect_timeout = 10s;
        opts.num_streams = streams;
        opts.shm_bytes = p == plane::mesh_shm ? std::size_t{256} << 10 : 0;
        return opts;
      });
      error = mesh->error;
      if (!error.empty()) return;
    }
    for (int r = 0; r < ranks; ++r) engines[r] = std::make_unique<engine>(at(r));
    for (int r = 0; r < ranks; ++r) at(r).start(engines[r].get());
  }

  transport& at(int r) { return fabric ? fabric->endpoint(r) : *mesh->t[static_cast<std::size_t>(r)]; }
  mesh::mesh_transport& mesh_at(int r) { return *mesh->t[static_cast<std::size_t>(r)]; }

  ~job() {
    if (fabric) fabric->stop();  // before the engines go
    if (mesh) mesh->close();
  }
};

enum class algo { ring_allreduce, recursive_doubling, broadcast, ring_allgather };

// One collective on every rank: inputs, what each rank must hold afterwards, what done said.
struct collective {
  algo kind;
  dtype type;
  reduce_op op;
  std::size_t count;
  uint64_t sequence;
  int root = 1;
  std::vector<std::vector<std::byte>> buf, expected;
  std::vector<std::size_t> counts;  // allgather: rank r gives count + r
  std::vector<status> result = std::vector<status>(ranks);
  std::vector<int> calls = std::vector<int>(ranks, 0);

  collective(algo k, dtype t, reduce_op o, std::size_t n, uint64_t seq, std::mt19937_64& rng)
      : kind(k), type(t), op(o), count(n), sequence(seq) {
    const std::size_t e = size_of(t);
    for (int r = 0; r < ranks; ++r) counts.push_back(n + static_cast<std::size_t>(r));
    std::size_t total = k == algo::ring_allgather ? std::accumulate(counts.begin(), counts.end(), std::size_t{0}) : n;
    buf.assign(ranks, std::vector<std::byte>(total * e, std::byte{0xEE}));
    expected.assign(ranks, std::vector<std::byte>(total * e));
    std::vector<const std::byte*> in;
    std::size_t at = 0;
    for (int r = 0; r < ranks; ++r) {
      if (k == algo::ring_allgather) {
        fill_input(t, o, buf[r].data() + at * e, counts[r], rng);
        if (counts[r]) std::memcpy(expected[0].data() + at * e, buf[r].data() + at * e, counts[r] * e);
        at += counts[r];
      } else if (k != algo::broadcast || r == root) {
        fill_input(t, o, buf[r].data(), n, rng);
      }
      in.push_back(buf[r].data());
    }
    if (k == algo::broadcast) expected[0] = buf[root];
    if (k == algo::ring_allreduce || k == algo::recursive_doubling) reference(t, o, in, expected[0].data(), n);
    for (int r = 1; r < ranks; ++r) expected[r] = expected[0];
  }

  std::unique_ptr<chunk_op> make(int r) {
    const int stream = static_cast<int>(sequence % streams);
    // Odd sequences: 64 KiB segments (many per chunk); even: 320 KiB, over the 256 KiB ring.
    const std::size_t segment = sequence % 2 ? std::size_t{64} << 10 : std::size_t{320} << 10;
    switch (kind) {
      case algo::ring_allreduce:
        return make_ring_allreduce(sequence, stream, r, ranks, buf[r].data(), count, type, op, segment);
      case algo::recursive_doubling:
        return std::make_unique<exchange_op>(sequence, stream, r, ranks, buf[r].data(), count, type, op);
      case algo::broadcast:
        return std::make_unique<broadcast_op>(sequence, stream, r, ranks, buf[r].data(), buf[r].size(), root, segment);
      case algo::ring_allgather:
        return make_ring_allgather(sequence, stream, r, ranks, buf[r].data(), counts, type, segment);
    }
    return nullptr;
  }

  std::string describe() const {
    static const char* names[] = {"ring_allreduce", "recursive_doubling", "broadcast", "ring_allgather"};
    return std::string(names[static_cast<int>(kind)]) + " " + std::string(name_of(type)) + " " +
           std::string(name_of(op)) + " count=" + std::to_string(count);
  }
};

class transport_suite : public ::testing::TestWithParam<plane> {};

TEST_P(transport_suite, every_collective_is_exact_with_several_in_flight) {
  job j(GetParam());
  ASSERT_TRUE(j.error.empty()) << j.error;
  if (GetParam() != plane::local) {
    // The table gave every peer the link this plane stands for, and the rings carry frames.
    const link_kind want = GetParam() == plane::mesh_shm ? link_kind::shm : link_kind::tcp;
    for (int r = 0; r < ranks; ++r)
      for (int p = 0; p < ranks; ++p)
        if (p != r) EXPECT_EQ(j.mesh_at(r).table().by_peer[p], want) << "rank " << r << " to " << p;
  }

  std::mt19937_64 rng(20261126);
  std::vector<std::unique_ptr<collective>> ops;
  uint64_t seq = 1;
  // 0, 1 and odd counts, and 300000 elements: chunks of many segments, and frames over the
  // 256 KiB ring that go on TCP beside it.
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1001}, std::size_t{300000}}) {
    ops.push_back(std::make_unique<collective>(algo::ring_allreduce, dtype::f32, reduce_op::sum, n, seq++, rng));
    ops.push_back(std::make_unique<collective>(algo::ring_allreduce, dtype::i64, reduce_op::max, n, seq++, rng));
    ops.push_back(std::make_unique<collective>(algo::broadcast, dtype::u8, reduce_op::sum, n, seq++, rng));
    ops.push_back(std::make_unique<collective>(algo::ring_allgather, dtype::f64, reduce_op::sum, n, seq++, rng));
    if (n <= 1001)
      ops.push_back(std::make_unique<collective>(algo::recursive_doubling, dtype::bf16, reduce_op::sum, n, seq++, rng));
  }

  std::mutex mu;
  std::condition_variable cv;
  std::size_t finished = 0;
  for (int r = 0; r < ranks; ++r) {
    j.at(r).post([&, r] {
      for (auto& o : ops)
        j.engines[r]->run(o->make(r), [&, r, c = o.get()](const status& st) {
          std::lock_guard<std::mutex> l(mu);
          ++c->calls[r];
          c->result[r] = st;
          ++finished;
          cv.notify_all();
        });
    });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, 30s, [&] { return finished == ops.size() * ranks; }))
        << name_of(GetParam()) << ": " << finished << " of " << ops.size() * ranks << " ops finished in 30 s";
  }
  for (auto& o : ops)
    for (int r = 0; r < ranks; ++r) {
      SCOPED_TRACE(std::string(name_of(GetParam())) + " " + o->describe() + " rank " + std::to_string(r));
      EXPECT_EQ(o->calls[r], 1);
      EXPECT_TRUE(o->result[r].ok()) << o->result[r].to_string();
      EXPECT_TRUE(o->buf[r] == o->expected[r]);
    }
  if (GetParam() == plane::mesh_shm) {
    for (int r = 0; r < ranks; ++r) {
      auto use = j.mesh_at(r).links();
      EXPECT_EQ(use.shm_streams, (ranks - 1) * streams) << "rank " << r;
      EXPECT_GT(use.shm_frames, 0u) << "rank " << r;
      EXPECT_GT(use.shm_missed, 0u) << "rank " << r << ": frames over the ring went on TCP";
    }
  }
  if (GetParam() == plane::mesh_tcp)
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(j.mesh_at(r).links().shm_frames, 0u) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(planes, transport_suite, ::testing::Values(plane::local, plane::mesh_tcp, plane::mesh_shm),
                         [](const auto& info) { return std::string(name_of(info.param)); });

}  // namespace
}  // namespace chorus
