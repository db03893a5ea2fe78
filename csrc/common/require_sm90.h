// The CUDA glue's guard for ops whose kernels are built for Hopper only (sm_90a): a clear error on
// any other device, naming the op and where it can run instead; else the current device's
// attributes. Torch glue (*_cuda.cpp) only.
#pragma once
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>

#include "common/device_attrs.h"

namespace mslk::cuda {

inline DeviceAttrs require_sm90(const char* op) {
  int dev = 0;
  DeviceAttrs attrs;
  C10_CUDA_CHECK(current_device_attrs(&dev, &attrs));
  TORCH_CHECK(attrs.cc_major == 9, op, ": the CUDA kernel is built for Hopper (sm_90a); this device is sm_",
              attrs.cc_major, attrs.cc_minor, ". Run it on the CPU reference or on an H100/H200");
  return attrs;
}

}  // namespace mslk::cuda
