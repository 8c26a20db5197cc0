// Process sets for chorus.common.process_sets (Horovod's basics): init with static sets,
// dynamic add/remove, and the look-ups, over the C++ API (bindings/cpp/chorus.hpp). Errors
// raise as module.cpp's raise() maps their codes (invalid_argument: ValueError).
#include <pybind11/stl.h>

#include "module_support.hpp"

namespace py = pybind11;

namespace chorus::python {

namespace {
template <class T>
T value_or_raise(result<T> r) {
  if (!r) raise(r.error());
  return std::move(*r);
}
}  // namespace

void register_process_sets(py::module_& m) {
  m.def(
      "init_with_process_sets",
      [](const std::vector<std::vector<int>>& lists) {
        status st;
        {
          py::gil_scoped_release nogil;
          st = chorus::init(lists);
        }
        if (!st.ok()) raise(st);
      },
      py::arg("process_sets"), "init() with static process sets (ids 1, 2, ... in order).");
  m.def(
      "add_process_set",
      [](std::vector<int> ranks) {
        result<int> id = status{};
        {
          py::gil_scoped_release nogil;
          id = chorus::add_process_set(std::move(ranks));
        }
        return value_or_raise(std::move(id));
      },
      py::arg("ranks"), "Registers a process set (collective; CHORUS_DYNAMIC_PROCESS_SETS=1); returns its id.");
  m.def(
      "remove_process_set",
      [](int id) {
        status st;
        {
          py::gil_scoped_release nogil;
          st = chorus::remove_process_set(id);
        }
        if (!st.ok()) raise(st);
      },
      py::arg("id"), "Removes a process set (collective; CHORUS_DYNAMIC_PROCESS_SETS=1).");
  m.def("process_set_ids", &chorus::process_set_ids);
  m.def("process_set_ranks", [](int id) { return value_or_raise(chorus::process_set_ranks(id)); });
  m.def("process_set_rank", [](int id) { return value_or_raise(chorus::process_set_rank(id)); });
  m.def("process_set_size", [](int id) { return value_or_raise(chorus::process_set_size(id)); });
}

}  // namespace chorus::python
