// Launchers of the rowwise FP8 GEMM (no torch headers). The dispatcher picks a CUTLASS sm90
// instantiation (when built with CUTLASS and the operands meet TMA's alignment rules) or the
// portable SIMT kernel that takes any shape, stride and output type.
#pragma once
#include <cuda_runtime.h>

#include "gemm/fp8_rowwise_params.h"

namespace mslk::gemm {

// Runs p on stream s: the CUTLASS kernel when it applies, else the SIMT kernel.
cudaError_t fp8_rowwise_run(const RowwiseGemmParams& p, cudaStream_t s);
// The portable kernel alone (any shape / stride / bf16 or fp16 output).
cudaError_t fp8_rowwise_simt(const RowwiseGemmParams& p, cudaStream_t s);
// The CUTLASS instantiation of row `ID` of fp8_rowwise_configs.h (one generated TU per row).
// Requires L == 1 or non-zero batch strides and the alignment checked by the dispatcher;
// returns cudaErrorNotSupported when CUTLASS's can_implement refuses the problem.
template <int ID>
cudaError_t fp8_rowwise_cutlass(const RowwiseGemmParams& p, cudaStream_t s);

}  // namespace mslk::gemm
