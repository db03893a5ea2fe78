// Host-side launch facts that do not change for a device within a process, read from the driver
// once per device instead of on every call: the SM count and compute capability of the current
// device, and per kernel its blocks per SM and its dynamic shared-memory limit. Plain CUDA runtime
// (no torch): shared by the kernel TUs. Every call still asks which device is current
// (cudaGetDevice, a thread-local read), so the caches are keyed on that device, never on device 0.
// Thread-safe; errors are returned to the caller and never cached.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace mslk::cuda {

struct DeviceAttrs {
  int sms = 0;       // cudaDevAttrMultiProcessorCount
  int cc_major = 0;  // cudaDevAttrComputeCapabilityMajor
  int cc_minor = 0;  // cudaDevAttrComputeCapabilityMinor
};

namespace device_attrs_impl {

constexpr int kMaxDevices = 64;  // device ids past this are asked on every call

inline bool cacheable(int dev) { return dev >= 0 && dev < kMaxDevices; }

// 0: not read yet; else 1 | sms << 16 | major << 8 | minor << 1, one word so that a reader sees
// all of it or none.
inline std::atomic<unsigned long long>& slot(int dev) {
  static std::atomic<unsigned long long> slots[kMaxDevices] = {};
  return slots[dev];
}

inline cudaError_t read(int dev, DeviceAttrs* a) {
  cudaError_t e = cudaDeviceGetAttribute(&a->sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&a->cc_major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&a->cc_minor, cudaDevAttrComputeCapabilityMinor, dev);
  return e;
}

}  // namespace device_attrs_impl

// The attributes of device `dev`: from the driver the first time, then from the cache.
inline cudaError_t device_attrs(int dev, DeviceAttrs* out) {
  namespace impl = device_attrs_impl;
  if (!impl::cacheable(dev)) return impl::read(dev, out);
  unsigned long long v = impl::slot(dev).load(std::memory_order_acquire);
  if (v == 0) {
    DeviceAttrs a;
    const cudaError_t e = impl::read(dev, &a);
    if (e != cudaSuccess) return e;
    v = 1ull | static_cast<unsigned long long>(a.sms) << 16 |
        static_cast<unsigned long long>(a.cc_major & 0xff) << 8 | static_cast<unsigned long long>(a.cc_minor & 0x7f) << 1;
    impl::slot(dev).store(v, std::memory_order_release);  // a racing thread stores the same value
  }
  out->sms = static_cast<int>(v >> 16);
  out->cc_major = static_cast<int>((v >> 8) & 0xff);
  out->cc_minor = static_cast<int>((v >> 1) & 0x7f);
  return cudaSuccess;
}

// The current device and its attributes.
inline cudaError_t current_device_attrs(int* dev, DeviceAttrs* out) {
  const cudaError_t e = cudaGetDevice(dev);
  return e == cudaSuccess ? device_attrs(*dev, out) : e;
}

// The current device and its SM count (*sms is left alone on an error).
inline cudaError_t current_device_sms(int* dev, int* sms) {
  DeviceAttrs a;
  const cudaError_t e = current_device_attrs(dev, &a);
  if (e == cudaSuccess) *sms = a.sms;
  return e;
}

// cudaOccupancyMaxActiveBlocksPerMultiprocessor of one kernel, remembered per (device, block size,
// dynamic shared memory); over 48 KB the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize is
// first raised to what the call needs (once per device and size; never lowered: the attribute is
// a cap, not a reservation, so a higher cap changes neither a launch nor its occupancy). Hold one
// static instance per kernel instantiation:
//   static KernelOccupancy occ;
//   occ.blocks_per_sm(kernel, dev, threads, smem, &per_sm);  // *per_sm left alone on an error
class KernelOccupancy {
 public:
  template <typename Kernel>
  cudaError_t blocks_per_sm(Kernel kernel, int dev, int threads, size_t smem, int* per_sm) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& x : entries_)
      if (x.dev == dev && x.threads == threads && x.smem == smem) return *per_sm = x.per_sm, cudaSuccess;
    if (smem > 48 * 1024) {
      size_t& limit = limit_of(dev);
      if (smem > limit) {
        const cudaError_t e =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        if (e != cudaSuccess) return e;
        limit = smem;
      }
    }
    int n = 0;
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem);
    if (e != cudaSuccess) return e;
    entries_.push_back({dev, threads, smem, n});
    *per_sm = n;
    return cudaSuccess;
  }

 private:
  struct Entry {
    int dev, threads;
    size_t smem;
    int per_sm;
  };
  struct Limit {
    int dev;
    size_t smem;
  };
  size_t& limit_of(int dev) {
    for (Limit& l : limits_)
      if (l.dev == dev) return l.smem;
    limits_.push_back({dev, 48 * 1024});
    return limits_.back().smem;
  }
  std::mutex mu_;  // uncontended: tens of ns, against microseconds for the driver queries
  std::vector<Entry> entries_;
  std::vector<Limit> limits_;
};

// A kernel's cudaFuncAttributeMaxDynamicSharedMemorySize set to its fixed need once per device
// (the attribute lives in the device's context) instead of before every launch. Hold one static
// instance per kernel instantiation.
class SmemLimitOnce {
 public:
  template <typename Kernel>
  cudaError_t ensure(Kernel kernel, int dev, int smem) {
    const bool cacheable = device_attrs_impl::cacheable(dev);
    if (cacheable && done_[dev].load(std::memory_order_acquire)) return cudaSuccess;
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess && cacheable) done_[dev].store(true, std::memory_order_release);
    return e;
  }

 private:
  std::atomic<bool> done_[device_attrs_impl::kMaxDevices] = {};
};

}  // namespace mslk::cuda
