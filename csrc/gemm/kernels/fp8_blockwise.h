// CUDA entry point of the block/group-scaled FP8 GEMM (sm90, CUTLASS). No torch headers: the glue
// (fp8_blockwise_cuda.cpp) brings the scales into the kernel's layouts and fills these params.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

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
  int row = -1;  // row of fp8_blockwise_configs.h; -1: by M
};

// Returns cudaErrorNotSupported, having launched nothing, when the kernel cannot take the
// problem (built without CUTLASS, TMA's 16-byte rules broken, a bad row).
cudaError_t fp8_blockwise_run(const BlockwiseKernelParams& p, cudaStream_t stream);

// The CUTLASS instantiation of row `ID` of fp8_blockwise_configs.h (one generated TU per row).
template <int ID>
cudaError_t fp8_blockwise_cutlass(const BlockwiseKernelParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
