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

// Largest M for which the fused kernel runs its narrow tile (bf16x9_fused.cu: both consumer
// warpgroups on the same 64 rows, 64 columns each) rather than two warpgroups of 64 rows.
inline constexpr int64_t kBf16x9FusedNarrowMaxM = 64;

// Largest M for which MSLK_BF16X9_KERNEL=auto takes the FMA kernel (bf16x9_fma.cu) where it
// applies: there the call is a read of B, which the fused kernel's 64-row products do not reach.
inline constexpr int64_t kBf16x9FmaMaxM = 32;

// F(id, max_m, mt, r, lk, p, dot): the FMA kernel's rows. MSLK_BF16X9_KERNEL=auto takes the first row
// whose max_m >= M (0: a row only MSLK_BF16X9_FMA_CONFIG=<id> runs); more rows than any max_m run
// the largest max_m's row in passes of its mt. mt: rows of A a pass; lk: lanes reading one row of B
// (16 bytes each, consecutive); r: B rows a lane streams, 32 / lk apart; p: steps of B loads in
// flight a lane. A CTA of 4 warps covers 4 r (32 / lk) rows of B. Each B float4 a lane loads
// serves mt x 4 FMAs; each A float4 it reads from shared memory serves r x 4. dot: 0, per-chunk
// partials; 4, each step's four products added to the sums (fewer registers; bf16x9_fma.cu).
// H100, N = K = 8192, us (bench/gemm/results_tune_bf16x9_fma_h100.md and _fma_wide_h100.md; the B
// read takes 89): M = 1 and 2 on row 0: 94 (row 1: 95); M = 4 on row 1: 96 (row 5: 98); M = 8 on
// row 5: 98 (row 10: 108, row 2: 112); M = 16 on row 10: 108 (row 8: 123, row 16: 121); M = 32 on
// row 10 in two passes: 185 (row 11: 188, row 14: 323, fused 212; row 19 in one pass: 180); M = 64:
// the fused kernel, 225 (row 14 in two passes: 310). H200 (results_tune_bf16x9_fma_rows_h200.md):
// M = 17 / 24 / 32 on row 19: 176 / 177 / 177 (row 10 in two passes: 185 / 185 / 187, fused 198 /
// 199 / 196), M = 16 on row 10: 99.
#define MSLK_BF16X9_FMA_CONFIGS(F)  \
  F(0, 2, 2, 4, 32, 2, 0)           \
  F(1, 4, 4, 2, 16, 2, 0)           \
  F(2, 0, 8, 2, 8, 2, 0)            \
  F(3, 0, 16, 1, 4, 4, 0)           \
  F(4, 0, 8, 4, 32, 2, 0)           \
  F(5, 8, 8, 4, 16, 2, 0)           \
  F(6, 0, 16, 4, 32, 2, 0)          \
  F(7, 0, 16, 2, 16, 2, 0)          \
  F(8, 0, 16, 4, 16, 2, 0)          \
  F(9, 0, 16, 2, 32, 2, 0)          \
  F(10, 16, 16, 4, 16, 2, 4)        \
  F(11, 0, 16, 4, 8, 2, 4)          \
  F(12, 0, 16, 2, 8, 2, 4)          \
  F(13, 0, 32, 2, 8, 2, 4)          \
  F(14, 0, 32, 4, 8, 2, 4)          \
  F(15, 0, 32, 2, 16, 2, 4)         \
  F(16, 0, 16, 2, 16, 2, 4)         \
  F(17, 0, 8, 4, 8, 2, 4)           \
  F(18, 0, 16, 4, 16, 4, 4)         \
  F(19, 32, 32, 4, 16, 2, 4)

#define MSLK_BF16X9_FMA_COUNT_ROW(...) +1
inline constexpr int kNumBf16x9FmaConfigs = 0 MSLK_BF16X9_FMA_CONFIGS(MSLK_BF16X9_FMA_COUNT_ROW);
#undef MSLK_BF16X9_FMA_COUNT_ROW

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
