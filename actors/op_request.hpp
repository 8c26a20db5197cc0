// One collective operation as a framework hands it to the pipeline: its spec, its buffers and
// the callback that ends it. Plain value, shared by the pipeline and the actors that carry it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus {

/// One collective operation handed to the pipeline. Buffers are caller-owned and untouched by
/// the caller until `done`.
struct op_request {
  tensor_spec spec;                 ///< name, kind (any collective_kind), dtype, shape, op, root, device
  /// allreduce/broadcast: == output (in place); allgather/alltoall: this rank's rows;
  /// reducescatter: the whole tensor (only read).
  const void* input = nullptr;
  /// allreduce/broadcast: the tensor; reducescatter: this rank's slice of dim 0 (Horovod's
  /// split, see runtime/collectives/scatter_plan.hpp: split_rows), written just before `done`;
  /// allgather/alltoall: nullptr (see below).
  void* output = nullptr;
  /// Called exactly once, from a pipeline thread: ok, or an error naming the tensor and rank(s).
  /// For allgather, `gathered` holds the concatenation (rank order) and `first_dims` each
  /// rank's dim 0; for alltoall, `gathered` holds the rows received (rank order) and
  /// `first_dims` how many came from each rank; empty otherwise.
  std::function<void(const status&, std::vector<std::byte> gathered, std::vector<int64_t> first_dims)> done;
  /// alltoall: rows of dim 0 sent to each rank, in rank order (size() entries summing to
  /// shape[0]); empty otherwise. (Last, so that {spec, input, output, done} still initializes.)
  std::vector<int64_t> splits;
  /// CUDA tensors: the device and the ready event (see op_ref).
  int device_index = 0;
  std::shared_ptr<void> ready;
};

}  // namespace chorus
