// The INT4 GEMM path for M > 16 (int4_gemm.h), its two bandwidth-bound passes: the packed weight
// to a BF16 [N, K] copy (fmaf(q, scale, zero) in float32, one rounding), and FP8 activations to
// BF16 with their row scale folded in. The BF16 GEMM itself: cuBLAS, from the glue (int4_gemm_cuda.cpp).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "gemm/kernels/int4_gemm.h"
#include "gemm/kernels/int4_nibble.cuh"

namespace mslk::gemm {
namespace {

using int4::load_s;
using int4::nib;

__device__ __forceinline__ uint32_t pack(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One thread: the 8 weights of one 4-byte word of one row -> 16 bytes of wb, so a warp's load is
// 128 contiguous bytes and its store 512 (a thread a 16-byte chunk of 32 weights wrote 64-byte
// strided stores and ran at about half the copy rate).
template <class S>
__global__ void __launch_bounds__(256) int4_dequant_w_kernel(Int4GemmParams p, uint4* wb) {
  const int64_t words = p.K / 8;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.N * words) return;
  const int64_t n = t / words, c = t % words, g = c * 8 / p.group;
  const int4::NibMagic mg;
  const uint32_t w = __ldg(reinterpret_cast<const uint32_t*>(p.w + n * p.ldw) + c), h = w >> 12;
  // kF8: the contract's float32 scale, float(group scale) * row scale
  const float s = p.w_row_scale != nullptr ? load_s<S>(p.scale, g * p.lds + n) * p.w_row_scale[n]
                                           : load_s<S>(p.scale, g * p.lds + n);
  const float z = p.zero != nullptr ? load_s<S>(p.zero, g * p.lds + n) : 0.f;
  // the scale times 2^(8 - P) for the bit positions P = 0, 4, 8, 12, 16 nib reads at
  const float s0 = s * 256.f, s4 = s * 16.f, s8 = s, s12 = s * 0.0625f, s16 = s * 0.00390625f;
  uint4 o;
  o.x = pack(fmaf(nib<0>(w, mg), s0, z), fmaf(nib<4>(w, mg), s4, z));
  o.y = pack(fmaf(nib<8>(w, mg), s8, z), fmaf(nib<12>(w, mg), s12, z));
  o.z = pack(fmaf(nib<16>(w, mg), s16, z), fmaf(nib<8>(h, mg), s8, z));
  o.w = pack(fmaf(nib<12>(h, mg), s12, z), fmaf(nib<16>(h, mg), s16, z));
  wb[t] = o;
}

// One thread: 8 activations of one row.
__global__ void __launch_bounds__(256) int4_dequant_x_kernel(Int4GemmParams p, uint4* xb) {
  const int64_t per_row = p.K / 8;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.M * per_row) return;
  const int64_t m = t / per_row, k8 = t % per_row;
  const uint2 u = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.x) + m * p.ldx + k8 * 8));
  const __nv_fp8_e4m3* e = reinterpret_cast<const __nv_fp8_e4m3*>(&u);
  const float s = p.x_scale[m];
  uint4 o;
  o.x = pack(float(e[0]) * s, float(e[1]) * s);
  o.y = pack(float(e[2]) * s, float(e[3]) * s);
  o.z = pack(float(e[4]) * s, float(e[5]) * s);
  o.w = pack(float(e[6]) * s, float(e[7]) * s);
  xb[t] = o;
}

}  // namespace

cudaError_t int4_dequant_w(const Int4GemmParams& p, void* wb, cudaStream_t stream) {
  if (p.K % 32 != 0 || p.group % 32 != 0) return cudaErrorNotSupported;
  const int64_t threads = p.N * (p.K / 8);
  const unsigned blocks = static_cast<unsigned>((threads + 255) / 256);
  uint4* out = static_cast<uint4*>(wb);
  switch (p.scale_type) {
    case Int4Scale::kF32: int4_dequant_w_kernel<float><<<blocks, 256, 0, stream>>>(p, out); break;
    case Int4Scale::kBF16: int4_dequant_w_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(p, out); break;
    default: int4_dequant_w_kernel<__nv_fp8_e4m3><<<blocks, 256, 0, stream>>>(p, out); break;
  }
  return cudaGetLastError();
}

cudaError_t int4_dequant_x(const Int4GemmParams& p, void* xb, cudaStream_t stream) {
  if (!p.x_fp8 || p.x_scale == nullptr || p.K % 8 != 0) return cudaErrorNotSupported;
  const int64_t threads = p.M * (p.K / 8);
  int4_dequant_x_kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(p, static_cast<uint4*>(xb));
  return cudaGetLastError();
}

}  // namespace mslk::gemm
