// Built while the C++ API has no join: the module offers none, and chorus.torch's join raises
// NotImplementedError.
#include "module_support.hpp"

namespace chorus::python {

void register_join(pybind11::module_&) {}

}  // namespace chorus::python
