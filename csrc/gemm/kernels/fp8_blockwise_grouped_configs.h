// THE table of CUTLASS sm90 ptr-array grouped instantiations of the device-side grouped
// block/group-scaled FP8 GEMM (f8f8bf16_groupwise_grouped), and the heuristic over it. Data, not
// code: CMakeLists.txt generates one translation unit per X(...) row (ids 0..n-1 in order);
// fp8_blockwise_grouped_dispatch.cu picks a row per call (MSLK_FP8_BLOCKWISE_GROUPED_CONFIG=<row
// id> forces one). The scales are applied per 128-K block in the mainloop (tile K 128, no fast
// accumulation).
#pragma once
#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong))
#define MSLK_FP8_BLOCKWISE_GROUPED_CONFIGS(X) \
  X(0, 128, 128, 128, 2, 1, 1)                \
  X(1, 64, 128, 128, 1, 1, 0)                 \
  X(2, 128, 128, 128, 1, 1, 1)

// B(max_avg_m, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative): the first bucket with
// ceil(total_M / G) <= max_avg_m wins (max_avg_m < 0: no limit). Unforced calls up to
// kFp8BlockwiseGroupedWgmmaMaxAvgM (below) take mslk's kernel first where it applies.
// Measured on the H200 (docs/design/gemm_tables.md, E 8 / 16 / 128 at 2048 / 512 / 64 rows a
// group): 64-row ping-pong 522-545 us against 617 (1x1 cluster) and 1015 us (2x1) at E 128;
// 128-row without a cluster 196 / 234 us against 205 / 283 (2x1) at E 16 uniform / skewed; the 2x1
// cluster 961 / 1087 us against 1030 / 1105 at E 8.
#define MSLK_FP8_BLOCKWISE_GROUPED_BUCKETS(B) \
  B(64, 64, 128, 128, 1, 1, 0)                \
  B(1024, 128, 128, 128, 1, 1, 1)             \
  B(-1, 128, 128, 128, 2, 1, 1)

namespace mslk::gemm {

// MSLK_FP8_BLOCKWISE_GROUPED_CONFIG=<number of X rows> forces mslk's own kernel
// (fp8_blockwise_grouped_wgmma.cu: 128 x 128 tiles, no cluster) instead of a CUTLASS row.
#define MSLK_FP8_BLOCKWISE_GROUPED_COUNT_ROW(...) +1
inline constexpr int kFp8BlockwiseGroupedWgmmaRow = 0 MSLK_FP8_BLOCKWISE_GROUPED_CONFIGS(MSLK_FP8_BLOCKWISE_GROUPED_COUNT_ROW);
#undef MSLK_FP8_BLOCKWISE_GROUPED_COUNT_ROW
// Unforced calls whose ceil(total_M / G) is at most this take mslk's kernel where it applies (else
// the buckets' CUTLASS row): it leads at small groups and ties or trails at larger ones. H100,
// 2026-12-06, one run, us, the CUTLASS pick against mslk's kernel, uniform / skewed sizes (N x K):
// E 128 x 64 rows (2048 x 7168) 745 / 850 against 704 / 797; E 16 x 512 (2048 x 5120) 197 / 234
// against 192 / 236; E 8 x 2048 (4096 x 7168) 919 / 1070 against 986 / 1040.
inline constexpr long long kFp8BlockwiseGroupedWgmmaMaxAvgM = 128;

#define MSLK_FP8_BLOCKWISE_GROUPED_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) \
  TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false},
inline constexpr TileConfig kFp8BlockwiseGroupedConfigs[] = {
    MSLK_FP8_BLOCKWISE_GROUPED_CONFIGS(MSLK_FP8_BLOCKWISE_GROUPED_CONFIG_ENTRY)};
#undef MSLK_FP8_BLOCKWISE_GROUPED_CONFIG_ENTRY
inline constexpr int kNumFp8BlockwiseGroupedConfigs =
    sizeof(kFp8BlockwiseGroupedConfigs) / sizeof(kFp8BlockwiseGroupedConfigs[0]);

#define MSLK_FP8_BLOCKWISE_GROUPED_BUCKET_ENTRY(mm, tm, tn, tk, cm, cn, coop) \
  AvgMBucket{mm, TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false}},
inline constexpr AvgMBucket kFp8BlockwiseGroupedBuckets[] = {
    MSLK_FP8_BLOCKWISE_GROUPED_BUCKETS(MSLK_FP8_BLOCKWISE_GROUPED_BUCKET_ENTRY)};
#undef MSLK_FP8_BLOCKWISE_GROUPED_BUCKET_ENTRY

}  // namespace mslk::gemm
