// chorus-testrank's hierarchical allreduce checks: every dtype and reduce op, sizes 0, 1, odd
// and several chunks, forced on and under auto, against a reference every rank computes from
// every rank's inputs (regenerated from their seeds). CHORUS_TEST_HOSTS="2,1" fakes hosts on
// one machine by setting CHORUS_HOST_ID per rank (ranks numbered host after host).
#include "tests/multiproc/rank/hier_checks.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/reduce_reference.hpp"

namespace chorus::testrank {

void apply_test_hosts(int rank) {
  const char* spec = std::getenv("CHORUS_TEST_HOSTS");
  if (!spec || !*spec) return;
  std::istringstream in(spec);
  std::string part;
  int first = 0, host = 0;
  while (std::getline(in, part, ',')) {
    int n = std::atoi(part.c_str());
    if (rank < first + n) {
      ::setenv("CHORUS_HOST_ID", ("testhost-" + std::to_string(host)).c_str(), 1);
      return;
    }
    first += n;
    ++host;
  }
}

namespace {

std::vector<std::byte> input_of(int rank, uint64_t which, dtype t, reduce_op op, std::size_t count) {
  std::vector<std::byte> buf(count * size_of(t));
  std::mt19937_64 rng(which * 7919 + static_cast<uint64_t>(rank));
  testing::fill_input(t, op, buf.data(), count, rng);
  return buf;
}

status check_one(communicator& c, allreduce_algorithm algo, uint64_t which, dtype t, reduce_op op, std::size_t count) {
  const int n = c.size();
  std::vector<std::vector<std::byte>> all;
  std::vector<const std::byte*> in;
  for (int r = 0; r < n; ++r) all.push_back(input_of(r, which, t, op, count));
  for (auto& b : all) in.push_back(b.data());
  std::vector<std::byte> expected(count * size_of(t));
  testing::reference(t, op, in, expected.data(), count);
  auto mine = all[static_cast<std::size_t>(c.rank())];
  auto st = c.allreduce(mine.data(), count, t, op, algo);
  std::string what = std::string(name_of(c.choose(count * size_of(t), algo))) + " allreduce of " +
                     std::to_string(count) + " " + std::string(name_of(t)) + " " + std::string(name_of(op));
  if (!st.ok()) return status{st.code(), what + ": " + st.message()};
  if (mine != expected) {
    std::size_t e = size_of(t), i = 0;
    while (std::memcmp(mine.data() + i * e, expected.data() + i * e, e) == 0) ++i;
    return status{errc::internal, what + ": element " + std::to_string(i) + " differs on rank " + std::to_string(c.rank())};
  }
  return {};
}

}  // namespace

status check_hierarchical(communicator& c) {
  std::printf("testrank: hosts %s; auto runs %s at 4 KiB and %s at 64 MiB\n", c.hosts().describe().c_str(),
              name_of(c.choose(4096, allreduce_algorithm::automatic)),
              name_of(c.choose(64u << 20, allreduce_algorithm::automatic)));
  std::fflush(stdout);
  const std::size_t multi = 3 * c.options().chunk_bytes + 13;  // bytes: several chunks, odd
  uint64_t which = 1;
  for (auto algo : {allreduce_algorithm::hierarchical, allreduce_algorithm::automatic})
    for (dtype t : testing::all_dtypes)
      for (reduce_op op : testing::all_ops)
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1001}, multi / size_of(t)})
          if (auto st = check_one(c, algo, which++, t, op, count); !st.ok()) return st;
  return {};
}

status hier_allreduce_once(communicator& c, std::size_t count, int iteration) {
  std::vector<float> buf(count, static_cast<float>(c.rank() + iteration));
  auto st = c.allreduce(buf.data(), count, dtype::f32, reduce_op::sum, allreduce_algorithm::hierarchical);
  if (!st.ok()) return st;
  const int n = c.size();
  const float want = static_cast<float>(n * (n - 1) / 2 + n * iteration);
  for (std::size_t i = 0; i < count; i += 4099)
    if (buf[i] != want)
      return status{errc::internal, "hierarchical allreduce: element " + std::to_string(i) + " is " +
                                        std::to_string(buf[i]) + ", expected " + std::to_string(want)};
  return {};
}

int self_kill_iteration(int rank) {
  const char* spec = std::getenv("CHORUS_TEST_KILL");
  if (!spec || !*spec) return -1;
  int r = -1, i = -1;
  if (std::sscanf(spec, "%d:%d", &r, &i) != 2 || r != rank) return -1;
  return i;
}

void die_during_allreduce(communicator& c, int iteration) {
  // The data plane holds it until we die.
  auto* buf = new std::vector<float>(1u << 20, static_cast<float>(c.rank() + iteration));
  c.allreduce_async(buf->data(), buf->size(), dtype::f32, reduce_op::sum, [](const status&) {},
                    allreduce_algorithm::hierarchical);
  die_soon("an allreduce");
}

void die_soon(const char* what) {
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  std::printf("testrank: killing myself in the middle of %s\n", what);
  std::fflush(stdout);
  ::raise(SIGKILL);
  std::abort();
}

}  // namespace chorus::testrank
