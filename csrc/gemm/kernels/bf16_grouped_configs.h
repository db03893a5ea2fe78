// THE table of CUTLASS sm90 ptr-array grouped instantiations of the BF16 stacked grouped GEMM
// (kForward and kDgrad of bf16_grouped_params.h), and the heuristic over it. Data, not code:
// CMakeLists.txt generates one translation unit per X(...) row (ids 0..n-1 in order),
// bf16_grouped_cutlass_dispatch.cu picks a row per call; a static_assert there checks that every
// bucket names an existing row.
#pragma once

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
// ceil(total_M / G) <= max_avg_m wins (max_avg_m < 0: no limit). The average group size is
// known on the host without reading M_sizes (no sync), the skew is not. From
// bench/gemm/results_bf16_grouped.md (H200; the benchmark times every row,
// MSLK_BF16_GROUPED_CONFIG=<row id> forces one): avg 64 rows -> 64x128 ping-pong (weight
// streaming; 64x256 ties or loses by up to 9% between runs); up to avg 1024 rows 128x256
// cooperative without a cluster (row 6, 2026-12-01, the best E16 x 512 row in two runs: fwd
// 272-274 us uniform / 315-317 skewed against 279-287 / 323-331 for 64x256 ping-pong, the bucket's
// row before, and 277-287 / 372-386 for the 2x1 cluster; dgrad 279-283 / 331-337 against 304-313 /
// 319-341); above, 128x256 cooperative with a 2x1 cluster.
// Timed and dropped: 128x128 ping-pong with a 2x1 cluster, 64x128 with K tiles of 128 (never
// ahead), 128x256 cooperative 1x2 and 256x128 cooperative 2x1 (2026-12-01: never ahead; the
// latter 3.4x slower at E128).
#define MSLK_BF16_GROUPED_BUCKETS(B) \
  B(64, 64, 128, 64, 1, 1, 0)        \
  B(1024, 128, 256, 64, 1, 1, 1)     \
  B(-1, 128, 256, 64, 2, 1, 1)

namespace mslk::gemm {

struct Bf16GroupedConfig {
  int tile_m, tile_n, tile_k, cluster_m, cluster_n;
  bool cooperative;
};

#define MSLK_BF16_GROUPED_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) \
  Bf16GroupedConfig{tm, tn, tk, cm, cn, (coop) != 0},
inline constexpr Bf16GroupedConfig kBf16GroupedConfigs[] = {
    MSLK_BF16_GROUPED_CONFIGS(MSLK_BF16_GROUPED_CONFIG_ENTRY)};
#undef MSLK_BF16_GROUPED_CONFIG_ENTRY
inline constexpr int kNumBf16GroupedConfigs = sizeof(kBf16GroupedConfigs) / sizeof(kBf16GroupedConfigs[0]);

struct Bf16GroupedBucket {
  long long max_avg_m;
  Bf16GroupedConfig config;
};
#define MSLK_BF16_GROUPED_BUCKET_ENTRY(mm, tm, tn, tk, cm, cn, coop) \
  Bf16GroupedBucket{mm, Bf16GroupedConfig{tm, tn, tk, cm, cn, (coop) != 0}},
inline constexpr Bf16GroupedBucket kBf16GroupedBuckets[] = {MSLK_BF16_GROUPED_BUCKETS(MSLK_BF16_GROUPED_BUCKET_ENTRY)};
#undef MSLK_BF16_GROUPED_BUCKET_ENTRY
inline constexpr int kNumBf16GroupedBuckets = sizeof(kBf16GroupedBuckets) / sizeof(kBf16GroupedBuckets[0]);

}  // namespace mslk::gemm
