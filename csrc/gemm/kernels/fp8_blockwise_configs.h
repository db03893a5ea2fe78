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

namespace mslk::gemm {

#define MSLK_FP8_BLOCKWISE_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) \
  TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false},
inline constexpr TileConfig kFp8BlockwiseConfigs[] = {MSLK_FP8_BLOCKWISE_CONFIGS(MSLK_FP8_BLOCKWISE_CONFIG_ENTRY)};
#undef MSLK_FP8_BLOCKWISE_CONFIG_ENTRY
inline constexpr int kNumFp8BlockwiseConfigs = sizeof(kFp8BlockwiseConfigs) / sizeof(kFp8BlockwiseConfigs[0]);

}  // namespace mslk::gemm
