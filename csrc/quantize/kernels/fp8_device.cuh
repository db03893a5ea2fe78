// Device pieces shared by the FP8 quantize kernels: scale rule, tile->scale index, stores.
#pragma once
#include "common/cuda_utils.cuh"
#include "common/device_attrs.h"
#include "common/fp8.h"
#include "quantize/kernels/fp8_quantize.h"

namespace mslk::quantize {

using namespace mslk::cuda;

struct TileScale {
  float scale;  // dequant multiplier, stored
  float inv;    // quant multiplier
};

__device__ __forceinline__ TileScale tile_scale(const Fp8TileParams& p, float amax) {
  float c = fmaxf(amax, p.eps);
  if (p.scale_ub) c = fminf(c, *p.scale_ub);
  return {c / kFp8E4M3Max, kFp8E4M3Max / c};
}

// Streaming load (read once, keep out of L1, 256-byte L2 fetches: the asm of
// tools/microbench/stream_patterns.cu),
// predicated inside the asm so that a masked tail costs no branch: zeros where !pred.
__device__ __forceinline__ uint4 ld_stream(const void* p, bool pred) {
  uint4 v;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
      " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(int(pred)));
  return v;
}

// Position of this thread's vector i inside the CTA tile. Single-row tiles need no division; when
// the CTA is a whole number of tile rows wide (blockDim % vpr == 0: every block tiling of 16-byte
// vectors here) the thread keeps one column and steps blockDim / vpr rows a vector, so the only
// division is once per thread (the per-vector division of the general case cost ~25 IMADs and, in
// the 64-register 1024-thread instantiation, spills).
template <bool ONE_ROW>
__device__ __forceinline__ void tile_vec_pos(int i, int vpr, int& r, int& c) {
  const int idx = threadIdx.x + i * blockDim.x;
  if (ONE_ROW) {
    r = 0, c = idx;
  } else if (blockDim.x % vpr == 0) {  // uniform; the compiler hoists threadIdx / vpr out of the loop
    const int r0 = threadIdx.x / vpr;
    r = r0 + i * (blockDim.x / vpr);
    c = threadIdx.x - r0 * vpr;
  } else {
    r = idx / vpr;
    c = idx - r * vpr;
  }
}

// Quantize one 16-byte vector of T and store its kVec16<T> bytes at out (aligned when vec_store).
template <typename T>
__device__ __forceinline__ void quant_store16(const uint4& u, float inv, uint8_t* out, bool vec_store) {
  constexpr int W = kVec16<T>;
  float f[W];
  unpack16<T>(u, f);
  uint32_t w[W / 4];  // four E4M3 bytes a word
#pragma unroll
  for (int i = 0; i < W / 4; ++i)
    w[i] = f32x2_to_e4m3x2(f[4 * i] * inv, f[4 * i + 1] * inv) |
           (uint32_t(f32x2_to_e4m3x2(f[4 * i + 2] * inv, f[4 * i + 3] * inv)) << 16);
  if (vec_store) {
    if constexpr (W == 8) *reinterpret_cast<uint2*>(out) = make_uint2(w[0], w[1]);
    else *reinterpret_cast<uint32_t*>(out) = w[0];
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) out[i] = (w[i / 4] >> (8 * (i % 4))) & 0xff;
  }
}

// Zero the alignment padding [K, out_stride) of rows [r0, r1).
__device__ __forceinline__ void zero_padding(const Fp8TileParams& p, int64_t r0, int64_t r1) {
  const int64_t pad = p.out_stride - p.in.K;
  if (pad <= 0) return;
  for (int64_t i = threadIdx.x; i < (r1 - r0) * pad; i += blockDim.x)
    p.out[(r0 + i / pad) * p.out_stride + p.in.K + i % pad] = 0;
}

// Can rows of the view be read as 16-byte vectors?
template <typename T>
inline bool rows_vectorizable(const Rows& r, int64_t tile_k) {
  constexpr int W = 16 / sizeof(T);
  return r.K % W == 0 && r.stride % W == 0 && tile_k % W == 0 &&
         reinterpret_cast<uintptr_t>(r.ptr) % 16 == 0;
}

}  // namespace mslk::quantize
