// Stream and shared-memory helpers for host glue.
#pragma once

#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace mslk::utils::device {

// Device a raw stream belongs to. The legacy/per-thread default streams resolve to the
// current device.
inline c10::DeviceIndex get_device_for_stream(const cudaStream_t& stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return c10::cuda::current_device();
  }
  int device = -1;
  C10_CUDA_CHECK(cudaStreamGetDevice(stream, &device));
  return static_cast<c10::DeviceIndex>(device);
}

inline c10::cuda::CUDAStream to_cuda_stream(const c10::cuda::CUDAStream& stream,
                                            [[maybe_unused]] int device_index = -1) {
  return stream;
}

// device_index < 0: ask the stream which device it belongs to.
inline c10::cuda::CUDAStream to_cuda_stream(const cudaStream_t& stream, int device_index = -1) {
  const c10::DeviceIndex device = device_index >= 0 ? static_cast<c10::DeviceIndex>(device_index)
                                                    : get_device_for_stream(stream);
  return c10::cuda::getStreamFromExternal(stream, device);
}

// Lets `kernel` launch with smem_bytes of dynamic shared memory on `device` (< 0: current).
// The attribute is per device, hence the guard.
template <typename Kernel>
void set_gpu_max_dynamic_shared_memory(Kernel kernel, size_t smem_bytes, int device = -1) {
  const c10::DeviceIndex dev =
      device < 0 ? c10::cuda::current_device() : static_cast<c10::DeviceIndex>(device);
  const c10::cuda::CUDAGuard guard(dev);
  const auto* props = at::cuda::getDeviceProperties(dev);
  TORCH_CHECK(smem_bytes <= props->sharedMemPerBlockOptin,
              "set_gpu_max_dynamic_shared_memory: requested ", smem_bytes,
              " bytes of dynamic shared memory, but device ", static_cast<int>(dev),
              " allows at most ", props->sharedMemPerBlockOptin, " bytes per block (opt-in)");
  C10_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem_bytes)));
}

}  // namespace mslk::utils::device
