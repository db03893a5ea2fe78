// The INT8 GEMM (int8_gemm.h): s8 wgmma with int32 accumulation, the epilogue scaling the
// accumulator in float32 and rounding to bf16. This TU: the 128 x 128 x 128 cooperative
// instantiation of cutlass_tn_gemm.cuh, and the entry point that picks it or the swapped one
// (int8_gemm_swap.cu). Tile choices: docs/design/int_gemm.md.
#include "gemm/kernels/int8_gemm.h"

#if MSLK_HAS_CUTLASS
#include "gemm/kernels/cutlass_tn_gemm.cuh"
#endif

namespace mslk::gemm {

cudaError_t int8_gemm_cutlass(const Int8GemmParams& p, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  using G = detail::CutlassTnGemm<int8_t, int32_t, cutlass::bfloat16_t, 128, 128, 128, 1, 1>;
  return G::run(p.x, p.ldx, p.w, p.ldw, p.out, p.ldd, p.M, p.N, p.K, p.scale, p.scale_ptr, stream);
#else
  return (void)p, (void)stream, cudaErrorNotSupported;
#endif
}

cudaError_t int8_gemm_run(const Int8GemmParams& p, cudaStream_t stream) {
  return p.swap ? int8_gemm_cutlass_swap(p, stream) : int8_gemm_cutlass(p, stream);
}

}  // namespace mslk::gemm
