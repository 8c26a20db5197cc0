// Stand-in ops of a joined rank (see join_filler.hpp).
#include "actors/join_filler.hpp"

#include "runtime/collectives/neutral_elements.hpp"
#include "runtime/collectives/ring_schedule.hpp"

namespace chorus {

op_ref make_join_filler(const tensor_spec& spec, int rank, int size, steady_time now) {
  op_ref o;
  o.handle = 0;
  o.spec = spec;
  o.enqueued_at = now;
  const auto bytes = static_cast<std::size_t>(std::max<int64_t>(0, spec.byte_size()));
  const auto elems = static_cast<std::size_t>(std::max<int64_t>(0, spec.num_elements()));
  switch (spec.kind) {
    case collective_kind::allgather:
    case collective_kind::alltoall:
      o.first_dim = 0;  // no rows from this rank
      if (spec.kind == collective_kind::alltoall) o.splits.assign(static_cast<std::size_t>(size), 0);
      return o;
    case collective_kind::reducescatter: {
      // The whole tensor (identity) as input, then room for this rank's slice.
      auto rows = static_cast<std::size_t>(spec.shape.empty() ? 0 : spec.shape[0]);
      auto row_bytes = rows ? bytes / rows : 0;
      auto slice = (block_begin(rows, size, rank + 1) - block_begin(rows, size, rank)) * row_bytes;
      o.filler = std::make_shared<std::vector<std::byte>>(bytes + slice);
      fill_identity(o.filler->data(), elems, spec.type, spec.op);
      o.input = o.filler->data();
      o.output = o.filler->data() + bytes;
      return o;
    }
    default:  // allreduce: the identity, in place; broadcast: scratch that receives the root's data
      o.filler = std::make_shared<std::vector<std::byte>>(bytes);
      if (spec.kind == collective_kind::allreduce) fill_identity(o.filler->data(), elems, spec.type, spec.op);
      o.input = o.filler->data();
      o.output = o.filler->data();
      return o;
  }
}

}  // namespace chorus
