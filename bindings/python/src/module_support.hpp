// What the module's source files share: raising a Chorus status as the Python exception for
// its code, submitting an operation (raising at once when it was rejected at the call), and
// the registration of the optional reduce-scatter and alltoall functions.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "torch_op.hpp"

namespace chorus::python {

/// Raises HorovodInternalError, ChorusArgumentError or RuntimeError for `st` (module.cpp).
[[noreturn]] void raise(const status& st);
/// Raises ChorusArgumentError (a ValueError and a RuntimeError) with `what`.
[[noreturn]] void raise_argument(const std::string& what);
/// Chorus' reduce_op for the module's op code (sum 0, average 1, min 2, max 3, product 4).
reduce_op to_reduce_op(int op);
/// op_options from chorus.torch's integer codes (-1: the job's default); bad codes raise.
op_options wire_options(int compression_code, int nan_check_code);

/// Runs `f` (which submits and returns the op) with the GIL held (enqueueing is quick); an
/// operation rejected at the call raises here, as Horovod raises at enqueue.
template <class Submit>
std::unique_ptr<torch_op> submit(Submit&& f) {
  try {
    std::unique_ptr<torch_op> op = f();
    if (op->poll()) {
      const status& st = op->finish();
      if (!st.ok()) raise(st);
    }
    return op;
  } catch (const argument_error& e) {
    raise_argument(e.what());
  }
}

/// Adds reducescatter_async and alltoall_async to the module (scatter_ops.cpp).
void register_scatter_ops(pybind11::module_& m);
/// Adds join (join_ops.cpp).
void register_join(pybind11::module_& m);
/// Adds init_with_process_sets, add/remove_process_set and the set look-ups (process_set_ops.cpp).
void register_process_sets(pybind11::module_& m);
/// elastic_ops.cpp: elastic_round, elastic_latest_round.
void register_elastic(pybind11::module_& m);
/// c10d/register.cpp: the torch.distributed backend's constructor, _create_process_group.
void register_c10d(pybind11::module_& m);

}  // namespace chorus::python
