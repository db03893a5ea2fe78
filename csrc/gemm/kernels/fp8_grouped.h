// CUDA entry point of the device-side grouped FP8 GEMM (fp8_grouped_params.h). No torch headers.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/fp8_grouped_params.h"

namespace mslk::gemm {

// A CUTLASS sm90 ptr-array grouped GEMM whose per-group arguments are written on the device
// (fp8_grouped_cutlass.cuh). Returns cudaErrorNotSupported, having launched nothing, when it
// does not apply (built without CUTLASS, or operands that break TMA's 16-byte rules); the caller
// then takes another path.
cudaError_t fp8_grouped_cutlass_run(const Fp8GroupedParams& p, cudaStream_t stream);

// The CUTLASS instantiation of row `ID` of fp8_grouped_configs.h (one generated TU per row).
template <int ID>
cudaError_t fp8_grouped_cutlass(const Fp8GroupedParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
