// Elastic jobs for chorus.torch.elastic: the round this job is in and the launcher's newest round
// (check_host_updates compares them). Joining a round happens inside init().
#include "module_support.hpp"

namespace chorus::python {

void register_elastic(pybind11::module_& m) {
  namespace py = pybind11;
  m.def("elastic_round", [] { return chorus::elastic_round(); },
        "The elastic round of the job in force; -1 when not initialized or not elastic.");
  m.def(
      "elastic_latest_round",
      [] {
        result<int64_t> r = status{errc::internal, "not asked"};
        {
          py::gil_scoped_release nogil;
          r = chorus::elastic_latest_round();
        }
        if (!r) raise(r.error());
        return *r;
      },
      "The newest round chorusrun formed; -1 outside an elastic job.");
}

}  // namespace chorus::python
