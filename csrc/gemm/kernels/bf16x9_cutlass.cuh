// One row of bf16x9_configs.h as a cutlass_tn_gemm.cuh instantiation: BF16 wgmma over K' = 9 kp
// with an FP32 accumulator and FP32 output (alpha 1).
#pragma once
#include "gemm/kernels/bf16x9.h"
#include "gemm/kernels/bf16x9_configs.h"
#include "gemm/kernels/cutlass_tn_gemm.cuh"

namespace mslk::gemm::detail {

template <int ID>
cudaError_t bf16x9_cutlass_row(const Bf16x9GemmParams& p, cudaStream_t stream) {
  constexpr TileConfig c = kBf16x9Configs[ID];
  using G = CutlassTnGemm<cutlass::bfloat16_t, float, float, c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n,
                          c.cooperative>;
  return G::run(p.a, p.kk, p.b, p.kk, p.out, p.ldd, p.M, p.N, p.kk, 1.f, nullptr, stream);
}

}  // namespace mslk::gemm::detail

// Defines bf16x9_gemm_row<ID> in the including TU.
#define MSLK_BF16X9_INSTANTIATE(ID)                                                  \
  namespace mslk::gemm {                                                             \
  template <>                                                                        \
  cudaError_t bf16x9_gemm_row<ID>(const Bf16x9GemmParams& p, cudaStream_t s) {       \
    return detail::bf16x9_cutlass_row<ID>(p, s);                                     \
  }                                                                                  \
  }
