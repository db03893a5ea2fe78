# Locate the installed PyTorch through its Python package, without find_package(Torch):
# that path drags in Caffe2's CUDA detection and fails on machines without a toolkit.
# Produces the interface target mslk::torch (headers, libs, ABI define) and, when
# torch was built with CUDA, mslk::torch_cuda.
if(NOT MSLK_PYTHON AND Python_EXECUTABLE)  # scikit-build-core: the interpreter doing the build
  set(MSLK_PYTHON "${Python_EXECUTABLE}")
endif()
if(NOT MSLK_PYTHON)
  find_program(MSLK_PYTHON NAMES python3 python REQUIRED)
endif()
execute_process(
  COMMAND "${MSLK_PYTHON}" -c "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.version.cuda or ''); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_info OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "mslk: could not import torch with ${MSLK_PYTHON}; install torch >= 2.10 first")
endif()
string(REPLACE "\n" ";" _torch_info "${_torch_info}")
list(GET _torch_info 0 TORCH_DIR)
list(GET _torch_info 1 TORCH_CXX11_ABI)
list(GET _torch_info 2 TORCH_CUDA_VERSION)
list(GET _torch_info 3 TORCH_VERSION)
message(STATUS "mslk: torch ${TORCH_VERSION} at ${TORCH_DIR} (CUDA '${TORCH_CUDA_VERSION}')")

add_library(mslk_torch INTERFACE)
add_library(mslk::torch ALIAS mslk_torch)
target_include_directories(mslk_torch SYSTEM INTERFACE
  "${TORCH_DIR}/include" "${TORCH_DIR}/include/torch/csrc/api/include")
target_compile_definitions(mslk_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
target_link_libraries(mslk_torch INTERFACE
  "${TORCH_DIR}/lib/libtorch.so" "${TORCH_DIR}/lib/libtorch_cpu.so" "${TORCH_DIR}/lib/libc10.so")

# Executables that link libtorch_cuda (the C++ tests): the linker checks that its dependencies
# (NCCL, cuDNN, ...) define every symbol it needs, and must find them where torch's RUNPATH does, in
# the pip packages beside it (site-packages/nvidia/*/lib), before an older copy in a -rpath
# directory: torch 2.15's libtorch_cuda needs NCCL symbols that the libnccl in CUDA 13.0's lib lacks.
file(GLOB _torch_dep_dirs LIST_DIRECTORIES true "${TORCH_DIR}/../nvidia/*/lib")
set(MSLK_TORCH_EXE_LINK_OPTIONS "")
foreach(_d IN LISTS _torch_dep_dirs)
  if(IS_DIRECTORY "${_d}")
    list(APPEND MSLK_TORCH_EXE_LINK_OPTIONS "LINKER:-rpath-link,${_d}")
  endif()
endforeach()

set(TORCH_HAS_CUDA OFF)
if(TORCH_CUDA_VERSION AND EXISTS "${TORCH_DIR}/lib/libtorch_cuda.so")
  set(TORCH_HAS_CUDA ON)
endif()
