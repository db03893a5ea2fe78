// Device helpers of the MoE kernels: counts, indices, scores, 16-byte rows, vector atomics.
#pragma once
#include "common/cuda_utils.cuh"
#include "moe/kernels/moe_kernels.h"

namespace mslk::moe {

using namespace mslk::cuda;

__device__ __forceinline__ int64_t load_idx(const void* p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}
// min(valid, n) (at least 0), or n when absent. Read on the device: no host sync.
__device__ __forceinline__ int64_t read_count(const Count& c, int64_t n) {
  if (!c.ptr) return n;
  const int64_t v = load_idx(c.ptr, c.int64, 0);
  return v < 0 ? 0 : (v > n ? n : v);
}
__device__ __forceinline__ float load_any(const void* p, Dtype d, int64_t i) {
  switch (d) {
    case Dtype::kFloat32: return static_cast<const float*>(p)[i];
    case Dtype::kFloat16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <typename T>
__device__ __forceinline__ uint4 pack16(const float (&f)[kVec16<T>]) {
  uint4 u;
  T* e = reinterpret_cast<T*>(&u);
#pragma unroll
  for (int i = 0; i < kVec16<T>; ++i) e[i] = from_f32<T>(f[i]);
  return u;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Atomic (relaxed, unordered) add of one 16-byte vector: a single vector reduction on sm_90.
template <typename T> __device__ __forceinline__ void red_add16(T* addr, const uint4& v);
template <> __device__ __forceinline__ void red_add16<__nv_bfloat16>(__nv_bfloat16* a, const uint4& v) {
  asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1,%2,%3,%4};" ::"l"(a), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w) : "memory");
}
template <> __device__ __forceinline__ void red_add16<__half>(__half* a, const uint4& v) {
  asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1,%2,%3,%4};" ::"l"(a), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w) : "memory");
}
template <> __device__ __forceinline__ void red_add16<float>(float* a, const uint4& v) {
  asm volatile("red.global.add.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(a), "f"(__uint_as_float(v.x)),
               "f"(__uint_as_float(v.y)), "f"(__uint_as_float(v.z)), "f"(__uint_as_float(v.w)) : "memory");
}

// dst[0:n) += src[0:n) by the whole CTA; vec: both 16-byte aligned and n % kVec16<T> == 0.
template <typename T>
__device__ __forceinline__ void cta_add_row(T* dst, const T* src, int64_t n, bool vec) {
  if (vec) {
    constexpr int V = kVec16<T>;
    const uint4* s = reinterpret_cast<const uint4*>(src);
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < n / V; v += blockDim.x) red_add16<T>(dst + v * V, __ldcs(s + v));
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(dst + i, src[i]);
  }
}

}  // namespace mslk::moe
