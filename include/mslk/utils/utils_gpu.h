// Device-property helpers for host glue. Everything is per device: no device-0 caches.
#pragma once

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

namespace mslk {

// Compute-capability major of the current device, cached per device (0 = not yet read).
inline int getDeviceArch() {
  static std::array<std::atomic<int>, C10_COMPILE_TIME_MAX_GPUS> cache{};
  const int device = at::cuda::current_device();
  TORCH_CHECK(device >= 0 && device < C10_COMPILE_TIME_MAX_GPUS,
              "mslk::getDeviceArch: device index ", device, " out of range [0, ",
              C10_COMPILE_TIME_MAX_GPUS, ")");
  int major = cache[device].load(std::memory_order_relaxed);
  if (major == 0) {
    major = at::cuda::getDeviceProperties(device)->major;
    if (major >= 10) {
      int runtime = 0;
      C10_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
      TORCH_CHECK(runtime >= 12080, "mslk: sm_", major,
                  "x kernels need CUDA runtime >= 12.8, but the runtime is ", runtime / 1000, ".",
                  (runtime % 1000) / 10);
    }
    cache[device].store(major, std::memory_order_relaxed);  // a racing duplicate read is harmless
  }
  return major;
}

// SMs a persistent kernel may use on `device_index` (< 0: current device): num_sms when
// given, else the device's SM count minus torch's SM carveout. Not cached: the carveout
// can change at run time, and torch already caches device properties.
inline int64_t getSMCount(int device_index, std::optional<int64_t> num_sms) {
  if (num_sms.has_value()) {
    TORCH_CHECK(*num_sms > 0, "mslk::getSMCount: num_sms must be > 0, got ", *num_sms);
    return *num_sms;
  }
  const int device = device_index < 0 ? static_cast<int>(at::cuda::current_device()) : device_index;
  TORCH_CHECK(device < at::cuda::device_count(), "mslk::getSMCount: device index ", device,
              " out of range, ", static_cast<int>(at::cuda::device_count()), " device(s) visible");
  int64_t sms = at::cuda::getDeviceProperties(device)->multiProcessorCount;
  if (const auto carveout = at::globalContext()._SMCarveout_EXPERIMENTAL(); carveout.has_value()) {
    sms -= *carveout;
  }
  TORCH_CHECK(sms > 0, "mslk::getSMCount: SM carveout leaves ", sms, " SMs on device ", device);
  return sms;
}

}  // namespace mslk
