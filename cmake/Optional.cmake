# Optional parts: each turns on by itself when what it needs is found, and can be forced off.
#   CHORUS_WITH_CUDA    CUDA toolkit + nvcc: CUDA tensors (host staging, device kernels);
#                       compiles and links without a GPU, whose tests then skip
#   CHORUS_WITH_NCCL    CHORUS_WITH_CUDA + NCCL: the NCCL data plane for CUDA tensors
#   CHORUS_WITH_GLOO    Gloo, the peer measured beside Chorus in chorus-bench
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
find_package(CUDAToolkit QUIET)
include(CheckLanguage)
check_language(CUDA)
set(_cuda_default OFF)
if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER)
  set(_cuda_default ON)
endif()
option(CHORUS_WITH_CUDA "Build CUDA tensor support (staging, kernels)" ${_cuda_default})
if(CHORUS_WITH_CUDA)
  # Hopper (H100/H200) machine code plus PTX that later GPUs compile; CMake 3.25 has no CUDA20.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
endif()
# NCCL: the toolkit's, the system's, or the one PyTorch's wheel brings (nvidia/nccl).
set(_nccl_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include ${CHORUS_NCCL_ROOT}/include)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints})
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
             HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/local/cuda/lib ${CHORUS_NCCL_ROOT}/lib)
set(_nccl_default OFF)
if(CHORUS_WITH_CUDA AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(_nccl_default ON)
endif()
option(CHORUS_WITH_NCCL "Build the NCCL data plane" ${_nccl_default})
if(CHORUS_WITH_NCCL AND NOT CHORUS_WITH_CUDA)
  message(FATAL_ERROR "CHORUS_WITH_NCCL needs CHORUS_WITH_CUDA (the CUDA toolkit and nvcc)")
endif()
if(CHORUS_WITH_NCCL AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
                        INTERFACE_LINK_LIBRARIES CUDA::cudart)
endif()
message(STATUS "Chorus: CUDA=${CHORUS_WITH_CUDA} NCCL=${CHORUS_WITH_NCCL}")

find_package(Gloo CONFIG QUIET PATHS /usr/share/cmake/Gloo)
set(_gloo_default OFF)
if(Gloo_FOUND)
  set(_gloo_default ON)
endif()
option(CHORUS_WITH_GLOO "Build the Gloo peer in chorus-bench" ${_gloo_default})
message(STATUS "Chorus: Gloo=${CHORUS_WITH_GLOO}")

# Python bindings: pybind11 + Debian's torch for /usr/bin/python3 (never a pyenv shim).
# Elsewhere (the GPU machine: a venv's torch) configure -DPYTHON_EXECUTABLE=... and put torch's
# and pybind11's CMake dirs on CMAKE_PREFIX_PATH; the python tests run with the same python.
set(PYTHON_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python used for the chorus module")
# pybind11 3.x finds Python with FindPython, which reads Python_EXECUTABLE instead.
if(NOT DEFINED Python_EXECUTABLE)
  set(Python_EXECUTABLE "${PYTHON_EXECUTABLE}")
endif()
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
