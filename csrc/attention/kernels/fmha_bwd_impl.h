// Internal interface of the fused attention backward between its dispatch (fmha_bwd.cu) and the
// per-head-dim instantiations (fmha_bwd_d*.cu). Host-only declarations; no torch.
#pragma once
#include <cuda_runtime.h>

#include "attention/kernels/fmha_bwd.h"

namespace mslk::attention {

// Float32 scratch carved from FmhaBwdParams::workspace by fmha_bwd.cu.
struct FmhaBwdScratch {
  float* dsum;      // [B, H, Mq]: D_i = sum_c dO[i, c] * O[i, c]
  float* dq_accum;  // [B, Mq, H, K] unscaled dQ sums (atomic mode), or null (deterministic mode)
};

// dK, dV (and the dQ sums in atomic mode), then dQ itself in deterministic mode.
cudaError_t fmha_bwd_d64(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);
cudaError_t fmha_bwd_d128(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);
cudaError_t fmha_bwd_d256(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);

}  // namespace mslk::attention
