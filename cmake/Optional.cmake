# Optional parts: each turns on by itself when what it needs is found, and can be forced off.
#   CHORUS_WITH_NCCL    CUDA toolkit + NCCL (GPU data plane; compile-and-link without a GPU)
#   CHORUS_WITH_GLOO    Gloo, the peer measured beside Chorus in chorus-bench
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/local/cuda/lib)
set(_nccl_default OFF)
if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(_nccl_default ON)
endif()
option(CHORUS_WITH_NCCL "Build the NCCL data plane" ${_nccl_default})
if(CHORUS_WITH_NCCL AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
                        INTERFACE_LINK_LIBRARIES CUDA::cudart)
endif()

find_package(Gloo CONFIG QUIET PATHS /usr/share/cmake/Gloo)
set(_gloo_default OFF)
if(Gloo_FOUND)
  set(_gloo_default ON)
endif()
option(CHORUS_WITH_GLOO "Build the Gloo peer in chorus-bench" ${_gloo_default})
message(STATUS "Chorus: NCCL=${CHORUS_WITH_NCCL} Gloo=${CHORUS_WITH_GLOO}")

# Python bindings: pybind11 + Debian's torch for /usr/bin/python3 (never a pyenv shim).
set(PYTHON_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python used for the chorus module")
# A build dir configured before the packages were installed cached Torch_DIR-NOTFOUND and an
# auto-detected OFF; re-decide then instead of keeping that OFF (an explicit -D choice on a
# fresh configure never sees Torch_DIR-NOTFOUND, so it is kept).
set(_python_was_missing OFF)
if(DEFINED CACHE{Torch_DIR} AND "$CACHE{Torch_DIR}" MATCHES "NOTFOUND$")
  set(_python_was_missing ON)
endif()
find_package(pybind11 CONFIG QUIET)
find_package(Torch QUIET PATHS /usr/lib/x86_64-linux-gnu/cmake /usr/share/cmake)
set(_python_default OFF)
if(pybind11_FOUND AND Torch_FOUND)
  set(_python_default ON)
endif()
option(CHORUS_WITH_PYTHON "Build the chorus Python module (chorus.torch)" ${_python_default})
if(_python_was_missing AND _python_default AND NOT CHORUS_WITH_PYTHON)
  set(CHORUS_WITH_PYTHON ON CACHE BOOL "Build the chorus Python module (chorus.torch)" FORCE)
endif()
message(STATUS "Chorus: Python=${CHORUS_WITH_PYTHON}")
