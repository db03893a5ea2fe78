// CUDA entry point of the block/group-scaled FP8 GEMM (sm90, CUTLASS). No torch headers: the glue
// (fp8_blockwise_cuda.cpp) brings the scales into the kernel's layouts and fills these params.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemm/fp8_grouped_params.h"

namespace mslk::gemm {

// out[m, n] (bf16) = sum over 128-K blocks kb of sfa[kb * sfa_ld + m] * sfb[kb * sfb_ld + n / 128]
//                   * sum_{k in kb} a[m * lda + k] * b[n * ldb + k]   (a, b E4M3FN bytes).
// sfa: one scale per row and K block, MN-major, sfa_ld a multiple of 4 and >= M, 16-byte aligned
// (TMA loads it); the rows [M, sfa_ld) are read and must hold finite values.
// sfb: one scale per 128 x 128 block, MN-major, sfb_ld >= ceil(N / 128).
struct BlockwiseKernelParams {
  const uint8_t* a;
  const uint8_t* b;
  void* out;
  int64_t M, N, K, lda, ldb, ldd;
  const float* sfa;
  int64_t sfa_ld;
  const float* sfb;
  int64_t sfb_ld;
  GemmTuning tuning;  // forced_row: MSLK_FP8_BLOCKWISE_CONFIG; swizzle: MSLK_GEMM_SWIZZLE
  int swizzle = 0;    // the shape's default (the dispatcher sets it from fp8_blockwise_configs.h)
};

// Returns cudaErrorNotSupported, having launched nothing, when the kernel cannot take the
// problem (built without CUTLASS, TMA's 16-byte rules broken, a bad row).
cudaError_t fp8_blockwise_run(const BlockwiseKernelParams& p, cudaStream_t stream);

// The CUTLASS instantiation of row `ID` of fp8_blockwise_configs.h (one generated TU per row).
template <int ID>
cudaError_t fp8_blockwise_cutlass(const BlockwiseKernelParams& p, cudaStream_t stream);

// The grouped form along M with sizes on the device (f8f8bf16_groupwise_grouped): the rowwise
// grouped params (fp8_grouped_params.h) with xs_rs = K/128 (group g's x scales are [K/128, m_g]
// MN-major from element S_g * K/128) and ws_gs = (K/128) * ceil(N/128) (w scales [G, K/128,
// N/128] contiguous); out [total_M, N] contiguous bf16. cudaErrorNotSupported, having launched
// nothing, when the kernel cannot take the problem (TMA's 16-byte rules, N % 8, a bad row).
cudaError_t fp8_blockwise_grouped_run(const Fp8GroupedParams& p, cudaStream_t stream);

// The CUTLASS instantiation of row `ID` of fp8_blockwise_grouped_configs.h.
template <int ID>
cudaError_t fp8_blockwise_grouped_cutlass(const Fp8GroupedParams& p, cudaStream_t stream);

// mslk's own wgmma kernel for the same problem (fp8_blockwise_grouped_wgmma.cu): the row after the
// CUTLASS rows of fp8_blockwise_grouped_configs.h. Needs K % 16 == 0, N % 8 == 0 and TMA's 16-byte
// rules, else cudaErrorNotSupported with nothing launched.
cudaError_t fp8_blockwise_grouped_wgmma_run(const Fp8GroupedParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
