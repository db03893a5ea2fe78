// The BF16 GEMM of the INT4 path for M > 16 (int4_gemm.h): out = a @ b^T over the dequantized
// weight. One instantiation of cutlass_tn_gemm.cuh, the 128 x 256 x 64 cooperative tile with a
// 2 x 1 cluster (bf16x9_cutlass.cu's tile), BF16 out.
#include "gemm/kernels/int4_gemm.h"

#if MSLK_HAS_CUTLASS
#include "gemm/kernels/cutlass_tn_gemm.cuh"
#endif

namespace mslk::gemm {

cudaError_t int4_bf16_gemm(const void* a, int64_t lda, const void* b, int64_t ldb, void* d, int64_t ldd, int64_t M,
                           int64_t N, int64_t K, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  using G = detail::CutlassTnGemm<cutlass::bfloat16_t, float, cutlass::bfloat16_t, 128, 256, 64, 2, 1>;
  return G::run(a, lda, b, ldb, d, ldd, M, N, K, 1.f, nullptr, stream);
#else
  return (void)a, (void)lda, (void)b, (void)ldb, (void)d, (void)ldd, (void)M, (void)N, (void)K, (void)stream,
         cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
