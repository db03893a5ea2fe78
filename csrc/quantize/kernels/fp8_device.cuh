// Device pieces shared by the FP8 quantize kernels: scale rule, tile->scale index, stores.
#pragma once
#include "common/cuda_utils.cuh"
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

// Quantize one 16-byte vector of T and store its kVec16<T> bytes at out (aligned when vec_store).
template <typename T>
__device__ __forceinline__ void quant_store16(const uint4& u, float inv, uint8_t* out, bool vec_store) {
  constexpr int W = kVec16<T>;
  float f[W];
  unpack16<T>(u, f);
  uint16_t b[W / 2];
#pragma unroll
  for (int i = 0; i < W / 2; ++i) b[i] = f32x2_to_e4m3x2(f[2 * i] * inv, f[2 * i + 1] * inv);
  if (vec_store) {
    if constexpr (W == 8) {
      *reinterpret_cast<uint2*>(out) = make_uint2(b[0] | (uint32_t(b[1]) << 16), b[2] | (uint32_t(b[3]) << 16));
    } else {
      *reinterpret_cast<uint32_t*>(out) = b[0] | (uint32_t(b[1]) << 16);
    }
  } else {
#pragma unroll
    for (int i = 0; i < W / 2; ++i) {
      out[2 * i] = b[i] & 0xff;
      out[2 * i + 1] = b[i] >> 8;
    }
  }
}

// Zero the alignment padding [K, out_stride) of rows [r0, r1).
__device__ __forceinline__ void zero_padding(const Fp8TileParams& p, int64_t r0, int64_t r1) {
  const int64_t pad = p.out_stride - p.in.K;
  if (pad <= 0) return;
  for (int64_t i = threadIdx.x; i < (r1 - r0) * pad; i += blockDim.x)
    p.out[(r0 + i / pad) * p.out_stride + p.in.K + i % pad] = 0;
}

template <typename F>
cudaError_t dispatch_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::kFloat32: f(float{}); break;
    case Dtype::kFloat16: f(__half{}); break;
    case Dtype::kBFloat16: f(__nv_bfloat16{}); break;
  }
  return cudaGetLastError();
}

// Can rows of the view be read as 16-byte vectors?
template <typename T>
inline bool rows_vectorizable(const Rows& r, int64_t tile_k) {
  constexpr int W = 16 / sizeof(T);
  return r.K % W == 0 && r.stride % W == 0 && tile_k % W == 0 &&
         reinterpret_cast<uintptr_t>(r.ptr) % 16 == 0;
}

}  // namespace mslk::quantize
