// The backend's one entry point in the Python module: _create_process_group, which
// chorus/torch/distributed.py registers with torch.distributed as the "chorus" backend.
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/utils/pybind.h>

#include "c10d/process_group.hpp"
#include "module_support.hpp"

namespace py = pybind11;

namespace chorus::python {

void register_c10d(py::module_& m) {
  m.def(
      "_create_process_group",
      [](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size, double timeout_s, const std::string& name,
         const std::vector<int>& global_ranks) -> c10::intrusive_ptr<::c10d::ProcessGroup> {
        const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
        return c10::make_intrusive<process_group_chorus>(store, rank, size, timeout, name, global_ranks);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("name"),
      py::arg("global_ranks"), py::call_guard<py::gil_scoped_release>(),
      "A Chorus process group for torch.distributed (blocks until every member joined).");
  m.def(
      "_shut_down_process_group",
      [](const c10::intrusive_ptr<::c10d::ProcessGroup>& pg) {
        auto* mine = dynamic_cast<process_group_chorus*>(pg.get());
        if (mine) mine->shut_down();
        return mine != nullptr;
      },
      py::arg("group"), py::call_guard<py::gil_scoped_release>(),
      "Closes a Chorus process group now (torch.distributed.destroy_process_group); False for another backend's.");
}

}  // namespace chorus::python
