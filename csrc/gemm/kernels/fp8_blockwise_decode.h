// CUDA entry points of the decode-shape block/group-scaled FP8 GEMM (M <= 16 tokens), beside the
// CUTLASS kernel of fp8_blockwise.h. No torch headers: the glue (fp8_blockwise_cuda.cpp) fills
// the params, allocates the split workspace and picks the path. Design: docs/design/fp8_blockwise_decode.md.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mslk::gemm {

inline constexpr int64_t kBlockwiseDecodeMaxM = 16;

// out[m, n] (bf16, row stride ldd) = sum over 128-K blocks kb of
//   sfa[m * sfa_sm + kb * sfa_sk] * sfb[(n / 128) * sfb_sn + kb * sfb_sk] * sum_{k in kb} a[m, k] * b[n, k]
// a [M, K] and b [N, K] E4M3FN bytes with row strides lda / ldb; the scales are float32 views of any
// strides (the groupwise layouts are read as they are, no copy).
struct BlockwiseDecodeParams {
  const uint8_t* a;
  const uint8_t* b;
  void* out;
  int64_t M, N, K, lda, ldb, ldd;
  const float* sfa;
  int64_t sfa_sm, sfa_sk;
  const float* sfb;
  int64_t sfb_sn, sfb_sk;
  float* workspace;  // [splits, M, N] float32 partials when splits > 1
};

// TMA's rules (16-byte aligned operands and row strides, K % 16 == 0) and M <= 16.
bool fp8_blockwise_decode_applies(const BlockwiseDecodeParams& p);
// The K split for `sms` SMs (forced > 0: that many, capped by the K blocks), never an empty split.
int fp8_blockwise_decode_splits(int64_t M, int64_t N, int64_t K, int sms, int forced);
// cudaErrorNotSupported, having launched nothing, when the kernel cannot take the problem.
cudaError_t fp8_blockwise_decode(const BlockwiseDecodeParams& p, int splits, cudaStream_t stream);

}  // namespace mslk::gemm
