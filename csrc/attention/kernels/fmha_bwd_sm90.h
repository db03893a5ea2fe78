// Hopper (sm_90a) fused attention backward: TMA + wgmma, warp-specialised (fmha_bwd_sm90_kernel.cuh).
// Same interface and semantics as fmha_bwd (fmha_bwd.h) for the problems it takes; fmha_bwd routes
// those here on an sm_90 device unless FmhaBwdParams::no_sm90 is set.
#pragma once
#include <cuda_runtime.h>

#include "attention/kernels/fmha_bwd.h"

namespace mslk::attention {

// bf16 / fp16, K == Kv in {64, 128} (and 256 with sm90_d256), no dropout, no bias, atomic (non-deterministic) dQ, TMA-legal
// pointers and strides, an sm_90 device, and whatever fmha_bwd_supports requires.
bool fmha_bwd_sm90_supports(const FmhaBwdParams& p);
// The whole backward (preprocess, main kernel, dQ conversion) with p.workspace laid out as fmha_bwd's
// (fmha_bwd_workspace_bytes). cudaErrorNotSupported where fmha_bwd_sm90_supports is false.
cudaError_t fmha_bwd_sm90(const FmhaBwdParams& p, cudaStream_t stream);

}  // namespace mslk::attention
