// Built while the C++ API has no reducescatter and alltoall: the module offers neither, and
// chorus.torch raises NotImplementedError for them.
#include "module_support.hpp"

namespace chorus::python {

void register_scatter_ops(pybind11::module_&) {}

}  // namespace chorus::python
