// THE table of CUTLASS sm90 ptr-array grouped instantiations of the BF16 grouped weight gradient
// (kWgrad of bf16_grouped_params.h: dW[g] [N, K] = dY_g^T @ X_g, groups along the reduction).
// Data: CMakeLists.txt generates one TU per X(...) row, each holding the three output variants
// (bf16; float32; float32 accumulated into). The first row whose tile
// satisfies the heuristic of bf16_wgrad_dispatch.cu wins; MSLK_BF16_WGRAD_CONFIG=<id> forces one.
#pragma once

// X(id, tile_m, tile_n, tile_k, cluster_m, cluster_n, cooperative (else ping-pong))
#define MSLK_BF16_WGRAD_CONFIGS(X) \
  X(0, 128, 256, 64, 2, 1, 1)      \
  X(1, 128, 128, 64, 1, 1, 1)

// Row 0 (large tiles) when N and K are both at least this, else row 1. Unmeasured guess.
#define MSLK_BF16_WGRAD_LARGE_MIN 1024

namespace mslk::gemm {

struct Bf16WgradConfig {
  int tile_m, tile_n, tile_k, cluster_m, cluster_n;
  bool cooperative;
};
#define MSLK_BF16_WGRAD_CONFIG_ENTRY(id, tm, tn, tk, cm, cn, coop) Bf16WgradConfig{tm, tn, tk, cm, cn, (coop) != 0},
inline constexpr Bf16WgradConfig kBf16WgradConfigs[] = {MSLK_BF16_WGRAD_CONFIGS(MSLK_BF16_WGRAD_CONFIG_ENTRY)};
#undef MSLK_BF16_WGRAD_CONFIG_ENTRY
inline constexpr int kNumBf16WgradConfigs = sizeof(kBf16WgradConfigs) / sizeof(kBf16WgradConfigs[0]);

}  // namespace mslk::gemm
