// Device helpers shared by the kernels: conversions, 16-byte vectors, FP8 codecs, reductions; and
// host ones (ceil_div, the dtype switch of a launch, the cooperative and the programmatic
// dependent launch).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/dtype.h"

namespace mslk::cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
// float -> T, rounding to nearest even.
template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Elements of T in one 16-byte vector.
template <typename T>
constexpr int kVec16 = 16 / sizeof(T);

// Unpack a 16-byte vector of T into floats.
template <typename T>
__device__ __forceinline__ void unpack16(const uint4& u, float (&f)[kVec16<T>]) {
  const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
  for (int i = 0; i < kVec16<T>; ++i) f[i] = to_f32(e[i]);
}

template <typename T>
__device__ __forceinline__ float absmax16(const uint4& u) {
  float f[kVec16<T>];
  unpack16<T>(u, f);
  float m = 0.f;
#pragma unroll
  for (int i = 0; i < kVec16<T>; ++i) m = fmaxf(m, fabsf(f[i]));  // fmaxf drops NaN
  return m;
}

// E4M3FN with round-to-nearest-even and saturation to +-448; NaN stays NaN.
__device__ __forceinline__ uint8_t f32_to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ uint16_t f32x2_to_e4m3x2(float a, float b) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3)));
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Max over the block; every thread gets the result. blockDim.x must be a multiple of 32.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_part[32];
  __shared__ float result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? warp_part[lane] : 0.f;
    v = warp_max(v);
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;
}

inline unsigned ceil_div(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

// f(T{}) with T the element type of `d` (launches for that type); then the launch's error.
template <typename F>
cudaError_t dispatch_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::kFloat32: f(float{}); break;
    case Dtype::kFloat16: f(__half{}); break;
    case Dtype::kBFloat16: f(__nv_bfloat16{}); break;
  }
  return cudaGetLastError();
}

// A launch whose kernel syncs the whole grid (cooperative_groups::this_grid().sync()): every CTA
// must be resident at once, and the launch fails, rather than hangs, where they cannot be.
template <typename... Params, typename... Args>
cudaError_t launch_cooperative(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// A programmatic dependent launch (sm_90+, `pdl`; else an ordinary one): the kernel is launched
// while the previous one in the stream runs its tail, and must call griddepcontrol.wait before it
// reads that kernel's results (the wait returns once the previous grid completed, its writes
// visible).
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, bool pdl,
                             Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace mslk::cuda
