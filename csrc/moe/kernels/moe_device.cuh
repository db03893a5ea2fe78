// Device helpers of the MoE kernels: counts, indices, scores, 16-byte rows, vector atomics, and
// the scans of the counting sorts (index_shuffling, the dense scatter-add).
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

// ---- scans of the counting sorts ----------------------------------------------------------
constexpr unsigned kFullMask = 0xffffffffu;

// Inclusive prefix sum over the lanes of a warp (all 32 lanes call it). Exact for lanes < kWidth
// (a power of two); lanes >= kWidth get partial sums.
template <int kWidth = 32>
__device__ __forceinline__ int warp_incl_scan(int v) {
  static_assert(kWidth > 0 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0, "power of two <= 32");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < kWidth; o <<= 1) {
    const int n = __shfl_up_sync(kFullMask, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

struct BlockScan {
  int excl;   // sum of v over the threads before this one
  int total;  // sum of v over the CTA
};

// Exclusive prefix sum of one int a thread over the CTA, and the CTA total, to every thread.
// blockDim.x == kThreads (a multiple of 32, <= 1024), every thread calls it. warp_tot: kThreads / 32
// ints of shared memory (inclusive prefixes of the warp sums on return); the caller must pass a
// __syncthreads() before writing them again (e.g. the next call). Two barriers.
template <int kThreads>
__device__ __forceinline__ BlockScan block_excl_scan(int v, int* warp_tot) {
  static_assert(kThreads % 32 == 0 && kThreads >= 32 && kThreads <= 1024, "whole warps, at most 1024 threads");
  constexpr int W = kThreads / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int inc = warp_incl_scan(v);
  if (lane == 31) warp_tot[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    const int wi = warp_incl_scan<W>(lane < W ? warp_tot[lane] : 0);
    if (lane < W) warp_tot[lane] = wi;
  }
  __syncthreads();
  return {(warp > 0 ? warp_tot[warp - 1] : 0) + inc - v, warp_tot[W - 1]};
}

// hist: [W][n] per-warp counts of n bins (shared memory). Bin b's W counts become their exclusive
// prefix over the warps; returns the CTA count of bin b.
template <int W>
__device__ __forceinline__ int hist_excl_over_warps(int* hist, int n, int b) {
  int run = 0;
#pragma unroll
  for (int w = 0; w < W; ++w) {
    const int c = hist[w * n + b];
    hist[w * n + b] = run;
    run += c;
  }
  return run;
}

// One step of a warp's stable placement: lane l holds bin d (< 0: nothing to place). Returns
// cursor[d] + the lanes below l with bin d (-1 when d < 0), and advances cursor[d] by the lanes
// with bin d. cursor: this warp's own bins (no other warp touches them); all 32 lanes call it.
__device__ __forceinline__ int warp_place(int d, int* cursor) {
  const int lane = threadIdx.x & 31;
  const unsigned same = __match_any_sync(kFullMask, d);
  const unsigned before = same & ((1u << lane) - 1u);
  const int pos = d >= 0 ? cursor[d] + __popc(before) : -1;
  __syncwarp();
  if (d >= 0 && before == 0) cursor[d] += __popc(same);
  __syncwarp();
  return pos;
}

}  // namespace mslk::moe
