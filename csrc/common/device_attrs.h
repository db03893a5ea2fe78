// Host-side launch facts that do not change for a device within a process, read from the driver
// once per device instead of on every call: the SM count and compute capability of the current
// device, and per kernel its blocks per SM, its dynamic shared-memory cap and its persistent grid.
// Plain CUDA runtime (no torch): shared by the kernel TUs. Every call still asks which device is
// current (cudaGetDevice, a thread-local read), so the caches are keyed on that device, never on
// device 0. Thread-safe; errors are returned to the caller and never cached.
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

// A kernel's cudaFuncAttributeMaxDynamicSharedMemorySize raised to what a launch on the current
// device `dev` needs: set on the first call per device, then only when a call needs more than the
// cap already set (a cap, not a reservation: a higher one changes neither a launch nor its
// occupancy). Set even under 48 KB, since the kernel's static shared memory also counts against
// the default. Every launch of the kernel must ask first; hold one static instance per kernel
// instantiation.
class SmemLimit {
 public:
  template <typename Kernel>
  cudaError_t ensure(Kernel kernel, int dev, size_t smem) {
    const bool cacheable = device_attrs_impl::cacheable(dev);
    if (smem == 0 || (cacheable && smem <= cap_[dev].load(std::memory_order_acquire))) return cudaSuccess;
    std::lock_guard<std::mutex> lock(mu_);  // a racing smaller size must not lower a cap just raised
    if (cacheable && smem <= cap_[dev].load(std::memory_order_relaxed)) return cudaSuccess;
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e == cudaSuccess && cacheable) cap_[dev].store(smem, std::memory_order_release);
    return e;
  }

 private:
  std::mutex mu_;
  std::atomic<size_t> cap_[device_attrs_impl::kMaxDevices] = {};
};

// cudaOccupancyMaxActiveBlocksPerMultiprocessor of one kernel, remembered per (device, block size,
// dynamic shared memory), the shared-memory cap first raised to what the call needs (SmemLimit).
// Hold one static instance per kernel instantiation:
//   static KernelOccupancy occ;
//   occ.blocks_per_sm(kernel, dev, threads, smem, &per_sm);  // *per_sm left alone on an error
class KernelOccupancy {
 public:
  template <typename Kernel>
  cudaError_t blocks_per_sm(Kernel kernel, int dev, int threads, size_t smem, int* per_sm) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& x : entries_)
      if (x.dev == dev && x.threads == threads && x.smem == smem) return *per_sm = x.per_sm, cudaSuccess;
    if (const cudaError_t e = smem_limit_.ensure(kernel, dev, smem); e != cudaSuccess) return e;
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
  std::mutex mu_;  // uncontended: tens of ns, against microseconds for the driver queries
  std::vector<Entry> entries_;
  SmemLimit smem_limit_;
};

// Grid of a persistent kernel: min(work, SMs x its co-resident CTAs at `threads` and `smem`), at
// least 1; 0, with the error cleared, when the driver refuses (the caller takes another path).
template <auto kernel>
int persistent_grid(long long work, int threads, size_t smem) {
  static KernelOccupancy occupancy;  // one per kernel
  int dev = 0, sms = 0, per_sm = 0;
  if (current_device_sms(&dev, &sms) != cudaSuccess ||
      occupancy.blocks_per_sm(kernel, dev, threads, smem, &per_sm) != cudaSuccess || per_sm < 1) {
    (void)cudaGetLastError();
    return 0;
  }
  const long long cap = static_cast<long long>(sms) * per_sm;
  return static_cast<int>(work < 1 ? 1 : work < cap ? work : cap);
}

// A kernel whose dynamic shared memory is fixed: the same cap, raised on its first launch on each
// device.
using SmemLimitOnce = SmemLimit;

}  // namespace mslk::cuda
