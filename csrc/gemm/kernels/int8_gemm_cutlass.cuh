// One row of int8_gemm_configs.h as a cutlass_tn_gemm.cuh instantiation: s8 wgmma with int32
// accumulation, the epilogue scaling the accumulator in float32 and rounding to bf16. A swap row
// runs the GEMM as out^T [N, M] = W X^T with a column-major D, which is out [M, N] itself.
#pragma once
#include "gemm/kernels/cutlass_tn_gemm.cuh"
#include "gemm/kernels/int8_gemm.h"

namespace mslk::gemm::detail {

template <int ID>
cudaError_t int8_gemm_cutlass_row(const Int8GemmParams& p, cudaStream_t stream) {
  constexpr TileConfig c = kInt8GemmConfigs[ID];
  using G = CutlassTnGemm<int8_t, int32_t, cutlass::bfloat16_t, c.tile_m, c.tile_n, c.tile_k, c.cluster_m,
                          c.cluster_n, c.cooperative, c.swap>;
  if constexpr (c.swap)
    return G::run(p.w, p.ldw, p.x, p.ldx, p.out, p.ldd, p.N, p.M, p.K, p.scale, p.scale_ptr, stream);
  else
    return G::run(p.x, p.ldx, p.w, p.ldw, p.out, p.ldd, p.M, p.N, p.K, p.scale, p.scale_ptr, stream);
}

}  // namespace mslk::gemm::detail

// Defines int8_gemm_row<ID> in the including TU.
#define MSLK_INT8_GEMM_INSTANTIATE(ID)                                                      \
  namespace mslk::gemm {                                                                    \
  template <>                                                                               \
  cudaError_t int8_gemm_row<ID>(const Int8GemmParams& p, cudaStream_t s) {                  \
    return detail::int8_gemm_cutlass_row<ID>(p, s);                                         \
  }                                                                                         \
  }
