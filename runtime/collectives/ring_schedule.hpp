// Ring schedules as pure functions. In step g rank r sends one block to its right neighbour
// and receives one from its left. Contract: the block received in step g is the block sent
// in step g+1, so a receiver forwards each segment as soon as it has it (pipelining).
#pragma once

#include <cstddef>
#include <vector>

namespace chorus {

struct ring_step {
  int send_block;  ///< block index sent to the right neighbour
  int recv_block;  ///< block index received from the left neighbour
  bool reduce;     ///< received data is reduced into ours (else copied over it)
};

/// Reduce-scatter (size-1 steps, reduce) then allgather (size-1 steps, copy). After the
/// reduce-scatter rank r owns the fully reduced block (r+1) mod size.
std::vector<ring_step> ring_allreduce_steps(int rank, int size);
/// The first half of ring_allreduce_steps: size-1 reduce steps, after which rank r owns the
/// fully reduced block (r+1) mod size.
std::vector<ring_step> ring_reducescatter_steps(int rank, int size);
/// size-1 copy steps; rank r starts by sending its own block r.
std::vector<ring_step> ring_allgather_steps(int rank, int size);

/// Balanced split of `count` elements into `parts`: part b is [block_begin(b), block_begin(b+1)).
std::size_t block_begin(std::size_t count, int parts, int b);

/// Recursive doubling with the non-power-of-two fold: step 0 folds ranks >= p2 into ranks
/// < size - p2, steps 1..log2(p2) exchange with rank ^ 2^(step-1), the last step unfolds.
struct exchange_step {
  int send_to = -1;    ///< peer this rank sends its current buffer to, or -1
  int recv_from = -1;  ///< peer this rank receives from, or -1
  bool reduce = true;  ///< reduce what arrives (else it replaces our buffer)
};
std::vector<exchange_step> recursive_doubling_steps(int rank, int size);

}  // namespace chorus
