// THE table of CUTLASS sm90 ptr-array grouped instantiations of the BF16 stacked grouped GEMM
// (kForward and kDgrad of bf16_grouped_params.h), and the heuristic over it. Data, not code:
// CMakeLists.txt generates one translation unit per X(...) row (ids 0..n-1 in order),
// bf16_grouped_cutlass_dispatch.cu picks a row per call; a static_assert there checks that every
// bucket names an existing row. MSLK_BF16_GROUPED_CONFIG=<row id> forces a row. Why each row
// and bucket, with the figures that chose them: docs/design/gemm_tables.md.
#pragma once
#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong))
#define MSLK_BF16_GROUPED_CONFIGS(X) \
  X(0, 128, 128, 64, 2, 1, 1)        \
  X(1, 64, 128, 64, 1, 1, 0)         \
  X(2, 128, 256, 64, 2, 1, 1)        \
  X(3, 128, 128, 64, 1, 1, 0)        \
  X(4, 64, 256, 64, 1, 1, 0)         \
  X(5, 256, 128, 64, 1, 2, 1)        \
  X(6, 128, 256, 64, 1, 1, 1)

// B(max_avg_m, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative): the first bucket with
// ceil(total_M / G) <= max_avg_m wins (max_avg_m < 0: no limit). Small groups stream weights
// (64x128 ping-pong); mid-size groups 128x256 cooperative; large groups add a 2x1 cluster.
#define MSLK_BF16_GROUPED_BUCKETS(B) \
  B(64, 64, 128, 64, 1, 1, 0)        \
  B(1024, 128, 256, 64, 1, 1, 1)     \
  B(-1, 128, 256, 64, 2, 1, 1)

namespace mslk::gemm {

#define MSLK_BF16_GROUPED_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false},
inline constexpr TileConfig kBf16GroupedConfigs[] = {MSLK_BF16_GROUPED_CONFIGS(MSLK_BF16_GROUPED_CONFIG_ENTRY)};
#undef MSLK_BF16_GROUPED_CONFIG_ENTRY
inline constexpr int kNumBf16GroupedConfigs = sizeof(kBf16GroupedConfigs) / sizeof(kBf16GroupedConfigs[0]);

#define MSLK_BF16_GROUPED_BUCKET_ENTRY(mm, tm, tn, tk, cm, cn, coop) \
  AvgMBucket{mm, TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false}},
inline constexpr AvgMBucket kBf16GroupedBuckets[] = {MSLK_BF16_GROUPED_BUCKETS(MSLK_BF16_GROUPED_BUCKET_ENTRY)};
#undef MSLK_BF16_GROUPED_BUCKET_ENTRY

}  // namespace mslk::gemm
