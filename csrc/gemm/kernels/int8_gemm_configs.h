// THE table of CUTLASS sm90 instantiations of the INT8 GEMM (int8_gemm.h). Data, not code: one
// kernel TU per row (row 0: int8_gemm_cutlass.cu, row 1: int8_gemm_swap.cu, each expanding
// MSLK_INT8_GEMM_INSTANTIATE of int8_gemm_cutlass.cuh), and int8_gemm_cutlass.cu's dispatch picks
// the swap row for M <= kInt8SwapMaxM, the other one above. A row with no TU fails to link.
// Plain C++: the glue includes it for the threshold.
#pragma once
#include <cstdint>

#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong), swap)
// swap = 1: the kernel computes out^T = W X^T into out itself (out^T is a column-major D), so
// tile_m runs along N (weight rows) and tile_n along M (tokens). Row 1 is the FP8 rowwise
// family's decode row (fp8_rowwise_configs.h rows 10-11, same byte width and wgmma k): 16 tokens
// fill a 16-wide wgmma, and N / 64 CTAs each stream their weight rows through a deep TMA ring
// (~22 stages of 10 KB). Figures and the rows it replaced: docs/design/int_gemm.md.
#define MSLK_INT8_GEMM_CONFIGS(X)  \
  X(0, 128, 128, 128, 1, 1, 1, 0) \
  X(1, 64, 16, 128, 1, 1, 0, 1)

namespace mslk::gemm {

#define MSLK_INT8_GEMM_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop, swap) \
  TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, (swap) != 0},
inline constexpr TileConfig kInt8GemmConfigs[] = {MSLK_INT8_GEMM_CONFIGS(MSLK_INT8_GEMM_CONFIG_ENTRY)};
#undef MSLK_INT8_GEMM_CONFIG_ENTRY
inline constexpr int kNumInt8GemmConfigs = sizeof(kInt8GemmConfigs) / sizeof(kInt8GemmConfigs[0]);

// M at or below which the swap row runs (its tile_n must cover it: one column tile of tokens).
inline constexpr int64_t kInt8SwapMaxM = 16;

// The first row with the given swap flag (-1: none).
constexpr int int8_gemm_pick_row(bool swap) {
  for (int i = 0; i < kNumInt8GemmConfigs; ++i)
    if (kInt8GemmConfigs[i].swap == swap) return i;
  return -1;
}

}  // namespace mslk::gemm
