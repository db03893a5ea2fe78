// CUDA glue shared by the device-side grouped FP8 GEMMs (rowwise: fp8_rowwise_cuda.cpp, groupwise:
// fp8_blockwise_cuda.cpp): the host-path switch, the forced row, the refusal.
#pragma once
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include "gemm/fp8_grouped_params.h"
#include "gemm/gemm_env.h"

namespace mslk::gemm {

// false (nothing run: the caller reads the sizes to the host and runs one GEMM a group) under
// MSLK_FP8_GROUPED_KERNEL=host or when `run` cannot take the problem; else true, having run it
// with the row `row_var` forces from a table of `rows` rows. A forced row that cannot take the
// problem is a ValueError naming the variable (`row_name`).
inline bool run_fp8_grouped(const Fp8GroupedParams& p0, env::Var row_var, const char* row_name, int rows,
                            cudaError_t (*run)(const Fp8GroupedParams&, cudaStream_t)) {
  if (read_env([] { return env::choice(env::Var::kFp8GroupedKernel, {"auto", "host"}, 0); }) == 1) return false;
  Fp8GroupedParams p = p0;
  p.tuning = env_tuning(row_var, rows);
  p.raster = env_raster();
  const cudaError_t e = run(p, c10::cuda::getCurrentCUDAStream().stream());
  if (e == cudaErrorNotSupported) {  // nothing launched
    TORCH_CHECK_VALUE(p.tuning.forced_row < 0, row_name, "=", p.tuning.forced_row,
                      " forces a row that cannot take this problem (G=", p.G, ", total_M=", p.total_M,
                      ", N=", p.N, ", K=", p.K,
                      "; TMA needs 16-byte aligned operands and strides and N % 8 == 0); unset it");
    return false;
  }
  C10_CUDA_CHECK(e);
  return true;
}

}  // namespace mslk::gemm
