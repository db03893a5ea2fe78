// The tuning knobs of the CUTLASS GEMMs. The glue fills them from the environment (include/mslk/utils/env.h)
// and hands them down in the params; kernels never read the environment. Torch-free.
#pragma once

namespace mslk::gemm {

struct GemmTuning {
  int forced_row = -1;  // a row of the family's config table instead of its heuristic; -1: none
  int swizzle = 0;      // tile-scheduler swizzle 1 | 2 | 4 | 8 (MSLK_GEMM_SWIZZLE); 0: the default
};

}  // namespace mslk::gemm
