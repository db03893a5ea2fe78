// THE table of CUTLASS sm90 instantiations of the rowwise FP8 GEMM. Data, not code: CMakeLists.txt
// generates one translation unit per row (X(id, ...) lines, ids 0..n-1 in order), and
// fp8_rowwise_dispatch.cu picks a row per call by the heuristic tables of fp8_rowwise_buckets.h
// (kept apart so that retuning them recompiles no instantiation).
#pragma once
#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong), fast_accum, swap)
// swap = 1: the kernel computes out^T = W X^T (swap AB), so tile_m runs along N (weight rows) and
// tile_n along M (tokens): decode-sized M fills a 16-wide wgmma instead of 64 rows of which M are
// used, and N / 64 CTAs each stream their weight rows through a deep TMA ring. Buckets never name
// these rows: MSLK_FP8_SWAP_AB_MAX_M in fp8_rowwise_buckets.h sends small M to them.
// Rows 8-9 are decode-size candidates the sweep times but no bucket names yet; rows timed and
// dropped, with the figures: docs/design/gemm_tables.md.
#define MSLK_FP8_ROWWISE_CONFIGS(X) \
  X(0, 128, 128, 128, 2, 1, 1, 1, 0)   \
  X(1, 128, 128, 128, 2, 1, 1, 0, 0)   \
  X(2, 64, 128, 128, 1, 1, 0, 1, 0)    \
  X(3, 64, 128, 128, 1, 1, 0, 0, 0)    \
  X(4, 128, 256, 128, 2, 1, 1, 1, 0)   \
  X(5, 128, 256, 128, 2, 1, 1, 0, 0)   \
  X(6, 128, 128, 128, 1, 1, 0, 1, 0)   \
  X(7, 128, 128, 128, 1, 1, 0, 0, 0)   \
  X(8, 64, 64, 128, 1, 1, 0, 1, 0)     \
  X(9, 64, 64, 128, 1, 1, 0, 0, 0)     \
  X(10, 64, 16, 128, 1, 1, 0, 1, 1)    \
  X(11, 64, 16, 128, 1, 1, 0, 0, 1)

namespace mslk::gemm {

#define MSLK_FP8_ROWWISE_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop, fast, swap) \
  TileConfig{tm, tn, tk, cm, cn, (coop) != 0, (fast) != 0, (swap) != 0},
inline constexpr TileConfig kFp8RowwiseConfigs[] = {MSLK_FP8_ROWWISE_CONFIGS(MSLK_FP8_ROWWISE_CONFIG_ENTRY)};
#undef MSLK_FP8_ROWWISE_CONFIG_ENTRY
inline constexpr int kNumFp8RowwiseConfigs = sizeof(kFp8RowwiseConfigs) / sizeof(kFp8RowwiseConfigs[0]);

}  // namespace mslk::gemm
