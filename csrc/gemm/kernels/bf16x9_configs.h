// THE table of CUTLASS sm90 instantiations of bf16x9_gemm's BF16 GEMM (bf16x9.h). Data, not code:
// one kernel TU per row (row 0: bf16x9_cutlass.cu, row 1: bf16x9_cutlass_small.cu, each expanding
// MSLK_BF16X9_INSTANTIATE of bf16x9_cutlass.cuh); bf16x9_cutlass.cu picks a row per call.
// Plain C++: no CUDA or torch headers.
#pragma once
#include <cstdint>

#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong))
// Row 0: the large BF16 tile of the wgrad table, for problems with half a wave of its tiles or more
// (2048 x 2048: 128 tiles on 132 SMs, 496 us on row 1 against 258 us on row 0).
// Row 1: 64 x 128 ping-pong, for the rest: at M = 128, N = 8192 row 0 has 32 tiles (a quarter of
// the SMs, each streaming K' = 9 kp alone) where row 1 has 128 (953 us against 1049 us).
#define MSLK_BF16X9_CONFIGS(X)    \
  X(0, 128, 256, 64, 2, 1, 1) \
  X(1, 64, 128, 64, 1, 1, 0)

namespace mslk::gemm {

// Largest M for which MSLK_BF16X9_KERNEL=auto takes the fused kernel (bf16x9_fused.cu) where it
// applies: on the H100 it beat the parts path up to M = 1024 and lost from 2048 on, at N = K = 4096
// and 8192 (bench/gemm/tune_bf16x9.py).
inline constexpr int64_t kBf16x9FusedMaxM = 1024;

#define MSLK_BF16X9_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false},
inline constexpr TileConfig kBf16x9Configs[] = {MSLK_BF16X9_CONFIGS(MSLK_BF16X9_CONFIG_ENTRY)};
#undef MSLK_BF16X9_CONFIG_ENTRY
inline constexpr int kNumBf16x9Configs = sizeof(kBf16x9Configs) / sizeof(kBf16x9Configs[0]);

// Tiles of row `row` over an M x N output.
constexpr int64_t bf16x9_tiles(int row, int64_t M, int64_t N) {
  return (M + kBf16x9Configs[row].tile_m - 1) / kBf16x9Configs[row].tile_m *
         ((N + kBf16x9Configs[row].tile_n - 1) / kBf16x9Configs[row].tile_n);
}

// The first row whose tiles fill at least half the `sms` SMs, else the last (the smallest tile).
constexpr int bf16x9_pick_row(int64_t M, int64_t N, int sms) {
  for (int r = 0; r + 1 < kNumBf16x9Configs; ++r)
    if (2 * bf16x9_tiles(r, M, N) >= sms) return r;
  return kNumBf16x9Configs - 1;
}

}  // namespace mslk::gemm
