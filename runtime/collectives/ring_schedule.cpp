// Ring and recursive-doubling schedules.
#include "runtime/collectives/ring_schedule.hpp"

namespace chorus {
namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

std::vector<ring_step> ring_reducescatter_steps(int rank, int size) {
  std::vector<ring_step> steps;
  for (int g = 0; g < size - 1; ++g) steps.push_back({mod(rank - g, size), mod(rank - g - 1, size), true});
  return steps;
}

std::vector<ring_step> ring_allreduce_steps(int rank, int size) {
  std::vector<ring_step> steps = ring_reducescatter_steps(rank, size);
  for (int k = 0; k < size - 1; ++k) steps.push_back({mod(rank + 1 - k, size), mod(rank - k, size), false});
  return steps;
}

std::vector<ring_step> ring_allgather_steps(int rank, int size) {
  std::vector<ring_step> steps;
  for (int k = 0; k < size - 1; ++k) steps.push_back({mod(rank - k, size), mod(rank - k - 1, size), false});
  return steps;
}

std::size_t block_begin(std::size_t count, int parts, int b) {
  std::size_t base = count / parts, extra = count % parts;
  auto ub = static_cast<std::size_t>(b);
  return ub * base + (ub < extra ? ub : extra);
}

std::vector<exchange_step> recursive_doubling_steps(int rank, int size) {
  int p2 = 1;
  while (p2 * 2 <= size) p2 *= 2;
  int extra = size - p2;
  int rounds = 0;
  while ((1 << rounds) < p2) ++rounds;
  std::vector<exchange_step> steps(rounds + 2);
  if (rank >= p2) {  // folded: hand our data over, get the result back at the end
    steps.front().send_to = rank - p2;
    steps.back().recv_from = rank - p2;
    steps.back().reduce = false;
    return steps;
  }
  if (rank < extra) steps.front().recv_from = rank + p2;
  for (int k = 1; k <= rounds; ++k) {
    int partner = rank ^ (1 << (k - 1));
    steps[k].send_to = partner;
    steps[k].recv_from = partner;
  }
  if (rank < extra) steps.back().send_to = rank + p2;
  return steps;
}

}  // namespace chorus
