// Tile-scheduler swizzle of the CUTLASS sm90 GEMMs: how many tiles wide a band of the persistent
// CTAs' raster walks before moving on. A wider band keeps the A and B panels that concurrently
// running CTAs share in L2 (at 8192^3 one raster row of 128x256 tiles needs all of B, 64 MB,
// more than the 50 MB L2). MSLK_GEMM_SWIZZLE=1|2|4|8 (read per call) overrides the default, so
// one process can time every value.
#pragma once
#include <cstdlib>

namespace mslk::gemm {

// Measured on the H200: see bench/gemm/results_tune_fp8_rowwise.md (swizzle columns).
inline constexpr int kDefaultSwizzle = 1;

inline int cutlass_swizzle(int fallback) {
  const char* s = std::getenv("MSLK_GEMM_SWIZZLE");
  if (s == nullptr || *s == '\0') return fallback;
  const int v = std::atoi(s);
  return (v == 1 || v == 2 || v == 4 || v == 8) ? v : fallback;
}

}  // namespace mslk::gemm
