// Horovod's join (built when the C++ API has it): blocks, without the GIL, until every rank
// joined; returns the last rank to join.
#include <chrono>

#include "module_support.hpp"

namespace chorus::python {

void register_join(pybind11::module_& m) {
  namespace py = pybind11;
  m.def(
      "join",
      [] {
        handle h = join_async();
        for (;;) {
          bool ended = false;
          {
            py::gil_scoped_release nogil;
            ended = h.wait(std::chrono::milliseconds(100)).code() != errc::timeout || h.poll();
          }
          if (ended) break;
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        }
        if (!h.result().ok()) raise(h.result());
        return h.last_rank();
      },
      "Until every rank joined, takes part in the other ranks' operations with neutral data; "
      "returns the last rank to join.");
}

}  // namespace chorus::python
