// THE table of CUTLASS sm90 ptr-array grouped instantiations of the device-side grouped FP8
// GEMM (fp8_grouped_params.h), and the heuristic over it. Data, not code: CMakeLists.txt
// generates one translation unit per X(...) row (ids 0..n-1 in order); fp8_grouped_dispatch.cu
// picks a row per call (MSLK_FP8_GROUPED_CONFIG=<row id> forces one) and a static_assert there
// checks every bucket names an existing row in both accumulation modes.
#pragma once
#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong), fast_accum)
#define MSLK_FP8_GROUPED_CONFIGS(X) \
  X(0, 128, 128, 128, 2, 1, 1, 1)   \
  X(1, 128, 128, 128, 2, 1, 1, 0)   \
  X(2, 64, 128, 128, 1, 1, 0, 1)    \
  X(3, 64, 128, 128, 1, 1, 0, 0)

// B(max_avg_m, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative): the first bucket with
// ceil(total_M / G) <= max_avg_m wins (max_avg_m < 0: no limit). Not measured yet
// (docs/design/gemm_tables.md says how to regenerate it).
#define MSLK_FP8_GROUPED_BUCKETS(B) \
  B(64, 64, 128, 128, 1, 1, 0)      \
  B(-1, 128, 128, 128, 2, 1, 1)

namespace mslk::gemm {

#define MSLK_FP8_GROUPED_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop, fast) \
  TileConfig{tm, tn, tk, cm, cn, (coop) != 0, (fast) != 0, false},
inline constexpr TileConfig kFp8GroupedConfigs[] = {MSLK_FP8_GROUPED_CONFIGS(MSLK_FP8_GROUPED_CONFIG_ENTRY)};
#undef MSLK_FP8_GROUPED_CONFIG_ENTRY
inline constexpr int kNumFp8GroupedConfigs = sizeof(kFp8GroupedConfigs) / sizeof(kFp8GroupedConfigs[0]);

#define MSLK_FP8_GROUPED_BUCKET_ENTRY(mm, tm, tn, tk, cm, cn, coop) \
  AvgMBucket{mm, TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false}},
inline constexpr AvgMBucket kFp8GroupedBuckets[] = {MSLK_FP8_GROUPED_BUCKETS(MSLK_FP8_GROUPED_BUCKET_ENTRY)};
#undef MSLK_FP8_GROUPED_BUCKET_ENTRY

}  // namespace mslk::gemm
