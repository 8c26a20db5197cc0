// Horovod's static process sets (hvd.init(process_sets=[...])): the job's process set table
// with the lists given to init registered as ids 1, 2, ..., after every rank showed that it
// was given the same lists (one allreduce of a digest, min and max, before the pipeline starts).
#pragma once

#include <memory>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/process_sets/process_set.hpp"

namespace chorus {
class communicator;
}

namespace chorus::detail {

/// The table for a job on `comm` with `lists` registered in order, each set once (a repeat, or a
/// list of every rank, keeps the id it has, as in Horovod). Collective: every rank calls it once
/// at init. A bad list (a rank out of range or twice) or lists that differ between ranks:
/// errc::invalid_argument on every rank, naming this rank's lists.
result<std::shared_ptr<process_set_table>> static_sets(communicator& comm, const std::vector<std::vector<int>>& lists);

/// ok when `lists` are the static sets `table` holds (ids 1..n, none removed): a second
/// init() while initialized must not ask for other sets.
status same_static_sets(const process_set_table& table, const std::vector<std::vector<int>>& lists);

}  // namespace chorus::detail
