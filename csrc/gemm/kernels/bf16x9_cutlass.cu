// The BF16 GEMM of bf16x9_gemm (bf16x9.h): out [M, N] float32 = A' [M, 9 kp] @ B' [N, 9 kp]^T,
// FP32 accumulation over the whole K' so the nine products are summed in one accumulator. One
// instantiation of cutlass_tn_gemm.cuh: the large BF16 tile of the wgrad table (128 x 256 x 64,
// cluster 2 x 1).
#include "gemm/kernels/bf16x9.h"

#if MSLK_HAS_CUTLASS
#include "gemm/kernels/cutlass_tn_gemm.cuh"
#endif

namespace mslk::gemm {

cudaError_t bf16x9_gemm_run(const Bf16x9GemmParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  using G = detail::CutlassTnGemm<cutlass::bfloat16_t, float, float, 128, 256, 64, 2, 1>;
  return G::run(p.a, p.kk, p.b, p.kk, p.out, p.ldd, p.M, p.N, p.kk, 1.f, nullptr, stream);
#else
  return (void)p, (void)stream, cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
