// CUDA entry point of the BF16 grouped GEMM contract (bf16_grouped_params.h). No torch headers.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/bf16_grouped_params.h"

namespace mslk::gemm {

// Runs p on `stream` without any host synchronisation (CUDA-graph safe).
cudaError_t bf16_grouped_run(const Bf16GroupedParams& p, cudaStream_t stream);

// The default path (MSLK_BF16_GROUPED_KERNEL, bf16_grouped_cuda.cpp): the CUTLASS sm90 ptr-array grouped
// GEMM for kForward and kDgrad with device-side argument setup (bf16_grouped_cutlass.cuh), also without a
// host sync. Returns cudaErrorNotSupported, having launched nothing, when it does not apply
// (built without CUTLASS, another mode, the _dynamic layout, no M_sizes, K == 0, or operands
// that break TMA's 16-byte rules); the caller then runs bf16_grouped_run.
cudaError_t bf16_grouped_cutlass_run(const Bf16GroupedParams& p, cudaStream_t stream);

// Likewise the default: the grouped weight gradient (kWgrad) on a CUTLASS ptr-array grouped
// GEMM grouped along the reduction (bf16_wgrad_cutlass.cuh); cudaErrorNotSupported, having
// launched nothing, when it does not apply.
cudaError_t bf16_wgrad_cutlass_run(const Bf16GroupedParams& p, cudaStream_t stream);
template <int ID>
cudaError_t bf16_wgrad_cutlass(const Bf16GroupedParams& p, cudaStream_t stream);

// The CUTLASS instantiation of row `ID` of bf16_grouped_configs.h (one generated TU per row).
template <int ID>
cudaError_t bf16_grouped_cutlass(const Bf16GroupedParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
