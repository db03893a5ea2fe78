// CUDA entry point of the BF16 grouped GEMM contract (bf16_grouped_params.h). No torch headers.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/bf16_grouped_params.h"

namespace mslk::gemm {

// Runs p on `stream` without any host synchronisation (CUDA-graph safe).
cudaError_t bf16_grouped_run(const Bf16GroupedParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
