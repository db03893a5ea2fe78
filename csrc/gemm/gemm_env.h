// The GEMM glue's readers of the tuning variables (include/mslk/utils/env.h), each turning a
// malformed value into a ValueError naming the variable. Glue only: kernels get a GemmTuning.
#pragma once
#include "common/checks.h"
#include "gemm/gemm_tuning.h"
#include "mslk/utils/env.h"

namespace mslk::gemm {

// MSLK_GEMM_SWIZZLE: 1, 2, 4 or 8; 0 when unset (the row's default).
inline int env_swizzle() {
  constexpr int kValues[] = {1, 2, 4, 8};
  const int i = read_env([] { return env::choice(env::Var::kGemmSwizzle, {"1", "2", "4", "8"}, -1); });
  return i < 0 ? 0 : kValues[i];
}

// MSLK_GEMM_RASTER: 1 (m) or 2 (n); 0 when unset (the family's default).
inline int env_raster() {
  return 1 + static_cast<int>(read_env([] { return env::choice(env::Var::kGemmRaster, {"m", "n"}, -1); }));
}

// A forced row of a config table of `rows` rows: a row id, or -1 when unset.
inline int env_forced_row(env::Var v, int rows) {
  return static_cast<int>(read_env([&] { return env::integer(v, -1, 0, rows - 1); }));
}

inline GemmTuning env_tuning(env::Var row_var, int rows) {
  GemmTuning t;
  t.forced_row = env_forced_row(row_var, rows);
  t.swizzle = env_swizzle();
  return t;
}

}  // namespace mslk::gemm
