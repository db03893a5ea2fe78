// THE table of CUTLASS sm90 instantiations of the rowwise FP8 GEMM, and the shape-bucket
// heuristic over it. Data, not code: CMakeLists.txt generates one translation unit per row
// (X(id, ...) lines, ids 0..n-1 in order), fp8_rowwise_dispatch.cu picks a row per call, and
// a static_assert there checks every bucket names an existing tile in both accumulation modes.
#pragma once

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong), fast_accum)
// Rows 8-11 are candidates for large M (the 2026-11-30 sweep left M >= 512 at 0.82-0.99x cuBLAS):
// timed by the tuning sweep, in no bucket yet.
#define MSLK_FP8_ROWWISE_CONFIGS(X) \
  X(0, 128, 128, 128, 2, 1, 1, 1)   \
  X(1, 128, 128, 128, 2, 1, 1, 0)   \
  X(2, 64, 128, 128, 1, 1, 0, 1)    \
  X(3, 64, 128, 128, 1, 1, 0, 0)    \
  X(4, 128, 256, 128, 2, 1, 1, 1)   \
  X(5, 128, 256, 128, 2, 1, 1, 0)   \
  X(6, 128, 128, 128, 1, 1, 0, 1)   \
  X(7, 128, 128, 128, 1, 1, 0, 0)   \
  X(8, 256, 128, 128, 2, 1, 1, 1)   \
  X(9, 256, 128, 128, 2, 1, 1, 0)   \
  X(10, 128, 256, 128, 1, 2, 1, 1)  \
  X(11, 128, 256, 128, 1, 2, 1, 0)

// B(max_m, min_k, min_waves, tile_m, tile_n, tile_k, cluster_m, cluster_n): the first bucket with
// M <= max_m (max_m < 0: no limit), K >= min_k and at least min_waves full waves of output tiles
// (ceil(M/tile_m) * ceil(N/tile_n) * batch >= min_waves * SMs) wins; the last bucket must take
// every shape. bench/gemm/tune_fp8_rowwise.py times every row on the H200 and
// tools/gemm/regen_fp8_buckets.py rewrites the lines between the markers with M-only buckets
// (min_k = min_waves = 0); the K and wave conditions below were added by hand from the same
// sweep (bench/gemm/results_tune_fp8_rowwise.md, 2026-11-30): 128x256 tiles lose when K is short
// (epilogue-bound: ping-pong hides it) or when their tiles fill under 4 waves (N = 1280: 2.4
// waves), and 128-row tiles lose to 64-row ones while they fill less than one wave.
// (MSLK_FP8_ROWWISE_TILE=<row id> forces a row's tile, in the call's accumulation mode.)
// BEGIN GENERATED BUCKETS
#define MSLK_FP8_ROWWISE_BUCKETS(B)     \
  B(128, 0, 0, 64, 128, 128, 1, 1)      \
  B(2048, 0, 1, 128, 128, 128, 1, 1)    \
  B(2048, 0, 0, 64, 128, 128, 1, 1)     \
  B(-1, 4096, 4, 128, 256, 128, 2, 1)   \
  B(-1, 0, 0, 128, 128, 128, 1, 1)
// END GENERATED BUCKETS

// The decode-shape kernel (fp8_rowwise_skinny.cu): MSLK_FP8_GEMM_KERNEL=auto takes it for
// M <= this (when its alignment rules hold); the kernel itself takes M <= 64.
#define MSLK_FP8_SKINNY_AUTO_MAX_M 1

// S(max_m, max_weight_mib, ctas_per_sm, min_k_per_split): how the skinny kernel splits K. The
// first row with M <= max_m and N*K <= max_weight_mib MiB wins (-1: no limit). splits =
// (ctas_per_sm * SMs) / (CTAs of one split: L * ceil(N / 64)), at least 1, at most
// K / min_k_per_split. K splits buy CTAs (bytes in flight) for small N, but every split adds an
// fp32 partial of L*M*N to write and re-read (8 * M / min_k of the weight bytes at most), hence
// longer splits for more tokens. ctas_per_sm <= 4 (what fits): at most one wave. First guesses;
// regenerate from bench/gemm/bench_fp8_rowwise.py runs.
#define MSLK_FP8_SKINNY_SPLITS(S) \
  S(4, 16, 4, 256)                \
  S(16, -1, 4, 512)               \
  S(64, -1, 4, 1024)

namespace mslk::gemm {

struct Fp8SkinnySplitRow {
  long long max_m, max_weight_mib;
  int ctas_per_sm, min_k_per_split;
};
#define MSLK_FP8_SKINNY_SPLIT_ENTRY(mm, mw, c, k) Fp8SkinnySplitRow{mm, mw, c, k},
inline constexpr Fp8SkinnySplitRow kFp8SkinnySplits[] = {MSLK_FP8_SKINNY_SPLITS(MSLK_FP8_SKINNY_SPLIT_ENTRY)};
#undef MSLK_FP8_SKINNY_SPLIT_ENTRY
inline constexpr int kNumFp8SkinnySplits = sizeof(kFp8SkinnySplits) / sizeof(kFp8SkinnySplits[0]);

struct Fp8RowwiseConfig {
  int tile_m, tile_n, tile_k, cluster_m, cluster_n;
  bool cooperative, fast_accum;
};

#define MSLK_FP8_ROWWISE_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop, fast) \
  Fp8RowwiseConfig{tm, tn, tk, cm, cn, (coop) != 0, (fast) != 0},
inline constexpr Fp8RowwiseConfig kFp8RowwiseConfigs[] = {MSLK_FP8_ROWWISE_CONFIGS(MSLK_FP8_ROWWISE_CONFIG_ENTRY)};
#undef MSLK_FP8_ROWWISE_CONFIG_ENTRY
inline constexpr int kNumFp8RowwiseConfigs = sizeof(kFp8RowwiseConfigs) / sizeof(kFp8RowwiseConfigs[0]);

struct Fp8RowwiseBucket {
  long long max_m, min_k;
  int min_waves, tile_m, tile_n, tile_k, cluster_m, cluster_n;
};
#define MSLK_FP8_ROWWISE_BUCKET_ENTRY(mm, mk, mw, tm, tn, tk, cm, cn) Fp8RowwiseBucket{mm, mk, mw, tm, tn, tk, cm, cn},
inline constexpr Fp8RowwiseBucket kFp8RowwiseBuckets[] = {MSLK_FP8_ROWWISE_BUCKETS(MSLK_FP8_ROWWISE_BUCKET_ENTRY)};
#undef MSLK_FP8_ROWWISE_BUCKET_ENTRY
inline constexpr int kNumFp8RowwiseBuckets = sizeof(kFp8RowwiseBuckets) / sizeof(kFp8RowwiseBuckets[0]);

}  // namespace mslk::gemm
