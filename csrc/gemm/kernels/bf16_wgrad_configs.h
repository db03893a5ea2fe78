// THE table of CUTLASS sm90 ptr-array grouped instantiations of the BF16 grouped weight gradient
// (kWgrad of bf16_grouped_params.h: dW[g] [N, K] = dY_g^T @ X_g, groups along the reduction).
// Data: CMakeLists.txt generates one TU per X(...) row, each holding the three output variants
// (bf16; float32; float32 accumulated into). bf16_wgrad_dispatch.cu picks row 0 when both output
// dims reach MSLK_BF16_WGRAD_LARGE_MIN, else row 1; MSLK_BF16_WGRAD_CONFIG=<id> forces one.
// See docs/design/gemm_tables.md.
#pragma once
#include "gemm/kernels/config_table.h"

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong))
#define MSLK_BF16_WGRAD_CONFIGS(X) \
  X(0, 128, 256, 64, 2, 1, 1)      \
  X(1, 128, 128, 64, 1, 1, 1)

// Row 0 (large tiles) when N and K are both at least this, else row 1 (not measured yet).
#define MSLK_BF16_WGRAD_LARGE_MIN 1024

namespace mslk::gemm {

#define MSLK_BF16_WGRAD_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) TileConfig{tm, tn, tk, cm, cn, (coop) != 0, false, false},
inline constexpr TileConfig kBf16WgradConfigs[] = {MSLK_BF16_WGRAD_CONFIGS(MSLK_BF16_WGRAD_CONFIG_ENTRY)};
#undef MSLK_BF16_WGRAD_CONFIG_ENTRY
inline constexpr int kNumBf16WgradConfigs = sizeof(kBf16WgradConfigs) / sizeof(kBf16WgradConfigs[0]);

}  // namespace mslk::gemm
