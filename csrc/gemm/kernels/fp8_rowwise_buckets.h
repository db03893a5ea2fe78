// The heuristics over fp8_rowwise_configs.h's CUTLASS rows and the decode kernel: which row (and
// tile-scheduler swizzle) a shape gets, when the decode kernel runs and how it splits K. Data, not
// code, included only by the dispatch and the decode kernel, so retuning recompiles two files; a
// static_assert in fp8_rowwise_dispatch.cu checks every bucket names an existing row in both
// accumulation modes.
#pragma once

// B(max_m, min_k, min_waves, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative, swizzle):
// the first bucket with M <= max_m (max_m < 0: no limit), K >= min_k and at least min_waves full
// waves of output tiles (ceil(M/tile_m) * ceil(N/tile_n) * batch >= min_waves * SMs) wins; the
// last bucket must take every shape; swizzle is the tile scheduler's (cutlass_swizzle.h).
// bench/gemm/tune_fp8_rowwise.py times every row on the H200 and tools/gemm/regen_fp8_buckets.py
// rewrites the lines between the markers with M-only buckets (min_k = min_waves = 0, swizzle 1);
// the K, wave and swizzle choices below were added by hand from the same sweep: 128x256 tiles lose
// when K is short or their tiles fill under 4 waves; 128-row tiles lose to 64-row ones while they
// fill less than one wave; swizzle 4 helps only the largest shapes. Figures:
// docs/design/gemm_tables.md.
// (MSLK_FP8_ROWWISE_TILE=<row id> forces a row's tile, in the call's accumulation mode.)
// BEGIN GENERATED BUCKETS
#define MSLK_FP8_ROWWISE_BUCKETS(B) \
  B(64, 0, 0, 64, 128, 128, 1, 1, 0, 1)       \
  B(2048, 20480, 3, 128, 256, 128, 2, 1, 1, 1) \
  B(2048, 0, 1, 128, 128, 128, 1, 1, 0, 1)    \
  B(2048, 0, 0, 64, 128, 128, 1, 1, 0, 1)     \
  B(-1, 4096, 4, 128, 256, 128, 2, 1, 1, 4)   \
  B(-1, 0, 0, 128, 128, 128, 1, 1, 0, 1)
// END GENERATED BUCKETS

// M <= this runs the swap-AB row of fp8_rowwise_configs.h (out^T = W X^T, tile 64 weight rows x 16
// tokens) instead of a bucket's row; 0 turns it off. It beats both the decode kernel and the
// 64x128 row up to M = 16 (docs/design/gemm_tables.md). Its CTAs are the N / 64 weight-row tiles
// (no K split), so where they fill under MSLK_FP8_SWAP_MIN_SM_PCT percent of the SMs,
// M <= MSLK_FP8_SKINNY_AUTO_MAX_M takes the decode kernel (split K) instead.
#define MSLK_FP8_SWAP_AB_MAX_M 16
#define MSLK_FP8_SWAP_MIN_SM_PCT 50

// The decode-shape kernel (fp8_rowwise_skinny.cu): MSLK_FP8_GEMM_KERNEL=auto takes it for
// M <= this (when its alignment rules hold and the swap row would fill too few SMs, above); the
// kernel itself takes M <= 64.
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

struct Fp8RowwiseBucket {
  long long max_m, min_k;
  int min_waves, tile_m, tile_n, tile_k, cluster_m, cluster_n;
  bool cooperative;
  int swizzle;
};
#define MSLK_FP8_ROWWISE_BUCKET_ENTRY(mm, mk, mw, tm, tn, tk, cm, cn, coop, sw) \
  Fp8RowwiseBucket{mm, mk, mw, tm, tn, tk, cm, cn, (coop) != 0, sw},
inline constexpr Fp8RowwiseBucket kFp8RowwiseBuckets[] = {MSLK_FP8_ROWWISE_BUCKETS(MSLK_FP8_ROWWISE_BUCKET_ENTRY)};
#undef MSLK_FP8_ROWWISE_BUCKET_ENTRY
inline constexpr int kNumFp8RowwiseBuckets = sizeof(kFp8RowwiseBuckets) / sizeof(kFp8RowwiseBuckets[0]);

}  // namespace mslk::gemm
