// Tile-scheduler swizzle of the CUTLASS sm90 GEMMs: how many tiles wide a band of the persistent
// CTAs' raster walks before moving on. A wider band keeps the A and B panels that concurrently
// running CTAs share in L2. MSLK_GEMM_SWIZZLE (read by the glue into GemmTuning) overrides the
// row's default so one process can time every value (docs/design/gemm_tables.md).
#pragma once
#include "gemm/gemm_tuning.h"

namespace mslk::gemm {

inline constexpr int kDefaultSwizzle = 1;

// The tuned swizzle if any, else the bucket's (row_default > 0), else kDefaultSwizzle.
constexpr int cutlass_swizzle(const GemmTuning& t, int row_default = 0) {
  return t.swizzle > 0 ? t.swizzle : row_default > 0 ? row_default : kDefaultSwizzle;
}

}  // namespace mslk::gemm
