// THE table of CUTLASS sm90 instantiations of the block/group-scaled FP8 GEMM. Data, not code:
// CMakeLists.txt generates one translation unit per row (X(id, ...) lines, ids 0..n-1 in order);
// fp8_blockwise_dispatch.cu picks a row by M. The scales are applied per 128-K block in the
// mainloop (the tile's K must be 128), so there is no fast-accumulation column.
#pragma once
#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong))
#define MSLK_FP8_BLOCKWISE_CONFIGS(X) \
  X(0, 128, 128, 128, 1, 1, 1)        \
  X(1, 64, 128, 128, 1, 1, 0)

// S(min_k, min_tiles_m, min_tiles_n, swizzle): the tile scheduler's swizzle (cutlass_swizzle.h) of
// the first rule whose minimums the problem meets (tiles of 128 along M and N), else 1. A long K
// makes each tile's A and B panels large; a band of 8 tiles keeps the panels a wave shares in L2.
// Measured on the H200 with MSLK_GEMM_SWIZZLE (docs/design/gemm_tables.md): at N x K = 7168 x 16384,
// M = 2048 / 4096 / 8192, swizzle 8 takes 477 -> 430, 927 -> 874, 2008 -> 1758 us; at 4096 x 7168,
// M = 4096 / 8192, 229 -> 221 and 476 -> 446 us; with 17 N tiles (N = 2112) it loses (128 -> 174 us).
#define MSLK_FP8_BLOCKWISE_SWIZZLE(S) \
  S(16384, 16, 1, 8)                  \
  S(7168, 32, 32, 8)

namespace mslk::gemm {

#define MSLK_FP8_BLOCKWISE_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) \
  TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false},
inline constexpr TileConfig kFp8BlockwiseConfigs[] = {MSLK_FP8_BLOCKWISE_CONFIGS(MSLK_FP8_BLOCKWISE_CONFIG_ENTRY)};
#undef MSLK_FP8_BLOCKWISE_CONFIG_ENTRY
inline constexpr int kNumFp8BlockwiseConfigs = sizeof(kFp8BlockwiseConfigs) / sizeof(kFp8BlockwiseConfigs[0]);

struct BlockwiseSwizzleRule {
  long long min_k, min_tiles_m, min_tiles_n;
  int swizzle;
};
#define MSLK_FP8_BLOCKWISE_SWIZZLE_ENTRY(k, tm, tn, sw) BlockwiseSwizzleRule{k, tm, tn, sw},
inline constexpr BlockwiseSwizzleRule kFp8BlockwiseSwizzle[] = {MSLK_FP8_BLOCKWISE_SWIZZLE(MSLK_FP8_BLOCKWISE_SWIZZLE_ENTRY)};
#undef MSLK_FP8_BLOCKWISE_SWIZZLE_ENTRY

// The swizzle of the first rule that takes (M, N, K), else 1.
constexpr int fp8_blockwise_swizzle(long long M, long long N, long long K) {
  for (const BlockwiseSwizzleRule& r : kFp8BlockwiseSwizzle)
    if (K >= r.min_k && (M + 127) / 128 >= r.min_tiles_m && (N + 127) / 128 >= r.min_tiles_n) return r.swizzle;
  return 1;
}

}  // namespace mslk::gemm
