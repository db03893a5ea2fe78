# Locate CUTLASS headers (header-only). Sources, first hit wins:
#   1. MSLK_CUTLASS_DIR (cache var, else env var): a folder holding include/ and
#      tools/util/include/ -- a CUTLASS checkout, the pip package's source/ folder, or a
#      git-ignored copy carried to machines without network.
#   2. the nvidia-cutlass pip package, asked through ${MSLK_PYTHON}.
# Produces INTERFACE target mslk::cutlass (SYSTEM includes: CUTLASS warnings are not ours)
# and MSLK_HAS_CUTLASS ON/OFF. Never fails: without CUTLASS the dependent code is skipped.
set(MSLK_CUTLASS_DIR "$ENV{MSLK_CUTLASS_DIR}" CACHE PATH
    "Folder holding CUTLASS include/ and tools/util/include/ (empty: ask the nvidia-cutlass pip package)")

set(_cutlass_root "${MSLK_CUTLASS_DIR}")
if(NOT _cutlass_root AND MSLK_PYTHON)
  execute_process(
    COMMAND "${MSLK_PYTHON}" -c "import os, cutlass_library; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))"
    OUTPUT_VARIABLE _cutlass_root OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _rc ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    set(_cutlass_root "")
  endif()
endif()

set(MSLK_HAS_CUTLASS OFF)
if(_cutlass_root AND EXISTS "${_cutlass_root}/include/cutlass/cutlass.h"
   AND EXISTS "${_cutlass_root}/include/cute/tensor.hpp")
  set(MSLK_HAS_CUTLASS ON)
  if(NOT TARGET mslk_cutlass)
    add_library(mslk_cutlass INTERFACE)
    add_library(mslk::cutlass ALIAS mslk_cutlass)
  endif()
  target_include_directories(mslk_cutlass SYSTEM INTERFACE "${_cutlass_root}/include")
  if(EXISTS "${_cutlass_root}/tools/util/include")
    target_include_directories(mslk_cutlass SYSTEM INTERFACE "${_cutlass_root}/tools/util/include")
  endif()
  message(STATUS "mslk: CUTLASS headers at ${_cutlass_root}")
else()
  if(MSLK_CUTLASS_DIR)
    message(WARNING "mslk: MSLK_CUTLASS_DIR=${MSLK_CUTLASS_DIR} holds no include/cutlass/cutlass.h; CUTLASS code is off")
  else()
    message(STATUS "mslk: CUTLASS not found (set MSLK_CUTLASS_DIR or pip install nvidia-cutlass); CUTLASS code is off")
  endif()
endif()
