// Portable rowwise FP8 GEMM: shared-memory tiles, float32 FMA accumulation, the epilogue of
// fp8_rowwise_params.h. Serves every shape the CUTLASS path cannot (unaligned K / N / strides,
// fp16 output, broadcast batches) and builds without CUTLASS. Correctness first; it is not the
// fast path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common/cuda_utils.cuh"

#include "gemm/kernels/fp8_rowwise.h"

namespace mslk::gemm {
namespace {

using cuda::e4m3_to_f32;
using cuda::from_f32;

constexpr int kBM = 64, kBN = 64, kBK = 32, kThreads = 256;

template <typename OutT>
__global__ void __launch_bounds__(kThreads) simt_kernel(RowwiseGemmParams p) {
  __shared__ float As[kBK][kBM + 1];
  __shared__ float Bs[kBK][kBN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBM, n0 = static_cast<int64_t>(blockIdx.y) * kBN;
  for (int64_t l = blockIdx.z; l < p.L; l += gridDim.z) {
    const uint8_t* A = p.a + l * p.batch_a;
    const uint8_t* B = p.b + l * p.batch_b;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < p.K; k0 += kBK) {
      for (int i = tid; i < kBM * kBK; i += kThreads) {
        const int r = i / kBK, c = i % kBK;
        const int64_t m = m0 + r, n = n0 + r, k = k0 + c;
        As[c][r] = (m < p.M && k < p.K) ? e4m3_to_f32(A[m * p.lda + k]) : 0.f;
        Bs[c][r] = (n < p.N && k < p.K) ? e4m3_to_f32(B[n * p.ldb + k]) : 0.f;
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
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t m = m0 + ty + 16 * i;
      if (m >= p.M) continue;
      const float xs = p.x_scale[l * p.batch_xs + m];
      OutT* out = static_cast<OutT*>(p.out) + l * p.batch_d + m * p.ldd;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t n = n0 + tx + 16 * j;
        if (n >= p.N) continue;
        const float ws = p.w_scale[l * p.batch_ws + n];
        const float bias = p.bias ? p.bias[l * p.batch_bias + n] : 0.f;
        out[n] = from_f32<OutT>(fmaf(xs, ws * acc[i][j], bias));
      }
    }
  }
}

}  // namespace

cudaError_t fp8_rowwise_simt(const RowwiseGemmParams& p, cudaStream_t s) {
  if (p.M <= 0 || p.N <= 0 || p.L <= 0) return cudaSuccess;
  const int64_t gm = (p.M + kBM - 1) / kBM, gn = (p.N + kBN - 1) / kBN;
  if (gm > 0x7fffffff || gn > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gm), static_cast<unsigned>(gn),
                  static_cast<unsigned>(p.L < 65535 ? p.L : 65535));
  if (p.out_dtype == OutDtype::kFloat16)
    simt_kernel<__half><<<grid, kThreads, 0, s>>>(p);
  else if (p.out_dtype == OutDtype::kFloat32)
    simt_kernel<float><<<grid, kThreads, 0, s>>>(p);
  else
    simt_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mslk::gemm
