// chorus-testrank's hierarchical allgather checks: every rank regenerates every rank's block
// from its seed, so each checks the whole result; counts differ by rank (allgatherv).
#include "tests/multiproc/rank/hier_gather_checks.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/multiproc/rank/hier_checks.hpp"
#include "tests/support/reduce_reference.hpp"

namespace chorus::testrank {
namespace {

std::vector<std::byte> block_of(int rank, uint64_t which, std::size_t bytes) {
  std::vector<std::byte> b(bytes);
  std::mt19937_64 rng(which * 104729 + static_cast<uint64_t>(rank));
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

status check_one(communicator& c, allreduce_algorithm algo, uint64_t which, dtype t,
                 const std::vector<std::size_t>& counts) {
  const std::size_t e = size_of(t);
  std::vector<std::byte> expected, mine;
  for (int r = 0; r < c.size(); ++r) {
    auto b = block_of(r, which, counts[static_cast<std::size_t>(r)] * e);
    if (r == c.rank()) mine = b;
    expected.insert(expected.end(), b.begin(), b.end());
  }
  std::vector<std::byte> out(expected.size(), std::byte{0x5a});
  auto st = c.allgather(mine.data(), out.data(), counts, t, algo);
  std::string what = std::string(name_of(c.choose_allgather(algo))) + " of " + std::string(name_of(t)) + " counts";
  for (auto k : counts) what += " " + std::to_string(k);
  if (!st.ok()) return status{st.code(), what + ": " + st.message()};
  if (out != expected) {
    std::size_t i = 0;
    while (out[i] == expected[i]) ++i;
    return status{errc::internal,
                  what + ": byte " + std::to_string(i) + " differs on rank " + std::to_string(c.rank())};
  }
  return {};
}

}  // namespace

status check_hier_allgather(communicator& c) {
  std::printf("testrank: allgather auto runs %s\n", name_of(c.choose_allgather(allreduce_algorithm::automatic)));
  std::fflush(stdout);
  const auto n = static_cast<std::size_t>(c.size());
  uint64_t which = 1;
  for (auto algo : {allreduce_algorithm::hierarchical, allreduce_algorithm::automatic})
    for (dtype t : testing::all_dtypes)
      for (int pattern = 0; pattern < 4; ++pattern) {
        std::vector<std::size_t> counts(n);
        for (std::size_t r = 0; r < n; ++r)
          counts[r] = pattern == 0   ? 0
                      : pattern == 1 ? 1
                      : pattern == 2 ? (r * 5 + 3) % 7  // odd, differing, some 0
                                     // several chunks of every rank's block, differing by rank
                                     : (3 * c.options().chunk_bytes + 13) / size_of(t) + r * 101;
        if (auto st = check_one(c, algo, which++, t, counts); !st.ok()) return st;
      }
  return {};
}

status hier_allgather_once(communicator& c, std::size_t count, int iteration) {
  std::vector<float> mine(count, static_cast<float>(c.rank() + iteration));
  std::vector<float> out(count * static_cast<std::size_t>(c.size()));
  auto st = c.allgather(mine.data(), out.data(), std::vector<std::size_t>(static_cast<std::size_t>(c.size()), count),
                        dtype::f32, allreduce_algorithm::hierarchical);
  if (!st.ok()) return st;
  for (std::size_t i = 0; i < out.size(); i += 4099) {
    const float want = static_cast<float>(static_cast<int>(i / count) + iteration);
    if (out[i] != want)
      return status{errc::internal, "hierarchical allgather: element " + std::to_string(i) + " is " +
                                        std::to_string(out[i]) + ", expected " + std::to_string(want)};
  }
  return {};
}

void die_during_allgather(communicator& c, int iteration) {
  // The data plane holds them until we die.
  const std::size_t count = 1u << 20;
  auto* mine = new std::vector<float>(count, static_cast<float>(c.rank() + iteration));
  auto* out = new std::vector<float>(count * static_cast<std::size_t>(c.size()));
  c.allgather_async(mine->data(), out->data(), std::vector<std::size_t>(static_cast<std::size_t>(c.size()), count),
                    dtype::f32, [](const status&) {}, allreduce_algorithm::hierarchical);
  die_soon("an allgather");
}

}  // namespace chorus::testrank
