// The swapped INT8 GEMM for decode-sized M (int8_gemm.h, swap = true): out^T [N, M] = W X^T, a
// 64 x 32 x 128 ping-pong instantiation of cutlass_tn_gemm.cuh, so the weight rows fill the
// 64-row MMA side and the few activation rows the narrow one.
#include "gemm/kernels/int8_gemm.h"

#if MSLK_HAS_CUTLASS
#include "gemm/kernels/cutlass_tn_gemm.cuh"
#endif

namespace mslk::gemm {

cudaError_t int8_gemm_cutlass_swap(const Int8GemmParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  using G = detail::CutlassTnGemm<int8_t, int32_t, cutlass::bfloat16_t, 64, 32, 128, 1, 1, false>;
  return G::run(p.w, p.ldw, p.x, p.ldx, p.out, p.ldd, p.N, p.M, p.K, p.scale, p.scale_ptr, stream);
#else
  return (void)p, (void)stream, cudaErrorNotSupported;
#endif
}

}  // namespace mslk::gemm
