// Portable block/group-scaled FP8 GEMM (fp8_blockwise_simt.h): shared-memory tiles of 64 x 64
// outputs, float32 FMA within each 128-K block, the block's scale product applied when the block
// ends. Correctness first; it serves the float16 / float32 results, not the fast path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common/cuda_utils.cuh"

#include "gemm/kernels/fp8_blockwise_simt.h"

namespace mslk::gemm {
namespace {

using cuda::e4m3_to_f32;
using cuda::from_f32;

constexpr int kBM = 64, kBN = 64, kBK = 32, kThreads = 256, kScaleK = 128;
static_assert(kScaleK % kBK == 0, "a K tile never straddles a scale block");

template <typename OutT>
__global__ void __launch_bounds__(kThreads) simt_kernel(BlockwiseDecodeParams p) {
  __shared__ float As[kBK][kBM + 1];
  __shared__ float Bs[kBK][kBN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBM, n0 = static_cast<int64_t>(blockIdx.y) * kBN;
  float acc[4][4] = {}, blk[4][4] = {};
  for (int64_t k0 = 0; k0 < p.K; k0 += kBK) {
    for (int i = tid; i < kBM * kBK; i += kThreads) {
      const int r = i / kBK, c = i % kBK;
      const int64_t m = m0 + r, n = n0 + r, k = k0 + c;
      As[c][r] = (m < p.M && k < p.K) ? e4m3_to_f32(p.a[m * p.lda + k]) : 0.f;
      Bs[c][r] = (n < p.N && k < p.K) ? e4m3_to_f32(p.b[n * p.ldb + k]) : 0.f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kBK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i], b[i] = Bs[kk][tx + 16 * i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) blk[i][j] = fmaf(a[i], b[j], blk[i][j]);
    }
    __syncthreads();
    if ((k0 + kBK) % kScaleK == 0 || k0 + kBK >= p.K) {  // the scale block ends: scale and fold it in
      const int64_t kb = k0 / kScaleK;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t m = m0 + ty + 16 * i;
        const float sa = m < p.M ? p.sfa[m * p.sfa_sm + kb * p.sfa_sk] : 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t n = n0 + tx + 16 * j;
          const float sb = n < p.N ? p.sfb[(n / kScaleK) * p.sfb_sn + kb * p.sfb_sk] : 0.f;
          acc[i][j] = fmaf(sa * sb, blk[i][j], acc[i][j]);
          blk[i][j] = 0.f;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty + 16 * i;
    if (m >= p.M) continue;
    OutT* out = static_cast<OutT*>(p.out) + m * p.ldd;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (n < p.N) out[n] = from_f32<OutT>(acc[i][j]);
    }
  }
}

}  // namespace

cudaError_t fp8_blockwise_simt(const BlockwiseDecodeParams& p, OutDtype out, cudaStream_t s) {
  if (p.M <= 0 || p.N <= 0) return cudaSuccess;
  const int64_t gm = (p.M + kBM - 1) / kBM, gn = (p.N + kBN - 1) / kBN;
  if (gm > 0x7fffffff || gn > 65535) return cudaErrorNotSupported;
  const dim3 grid(static_cast<unsigned>(gm), static_cast<unsigned>(gn));
  if (out == OutDtype::kFloat16)
    simt_kernel<__half><<<grid, kThreads, 0, s>>>(p);
  else if (out == OutDtype::kFloat32)
    simt_kernel<float><<<grid, kThreads, 0, s>>>(p);
  else
    simt_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mslk::gemm
