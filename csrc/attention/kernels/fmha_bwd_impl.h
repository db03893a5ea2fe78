// Internal interface of the fused attention backward between its dispatch (fmha_bwd.cu) and the
// per-head-dim instantiations (fmha_bwd_d*.cu, fmha_bwd_sm90_d*.cu). Host-only declarations; no torch.
#pragma once
#include <cuda_runtime.h>

#include "attention/kernels/fmha_bwd.h"

namespace mslk::attention {

// Float32 scratch carved from FmhaBwdParams::workspace by fmha_bwd.cu.
struct FmhaBwdScratch {
  float* dsum;      // [B, H, Mq]: D_i = sum_c dO[i, c] * O[i, c]
  float* dq_accum;  // unscaled dQ sums (atomic mode): [B, Mq, H, K], or tile-contiguous
                    // (fmha_bwd_dq_tiles.h) for a Hopper kernel run with them; null: deterministic mode
};

// dK, dV (and the dQ sums in atomic mode), then dQ itself in deterministic mode.
cudaError_t fmha_bwd_d64(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);
cudaError_t fmha_bwd_d128(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);
cudaError_t fmha_bwd_d256(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);

// The Hopper main kernels (atomic mode only: w.dq_accum is set), by K == Kv.
cudaError_t fmha_bwd_sm90_d64(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);
cudaError_t fmha_bwd_sm90_d128(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);
cudaError_t fmha_bwd_sm90_d256(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream);

// The backward around a main-kernel launcher: workspace checks, preprocess, dQ sums cleared, `main`,
// dQ conversion, with the sums laid out as rows or (dq_tiles, which needs p.sm90_dq_tiles for the
// workspace size) as tiles. Defined in fmha_bwd.cu; fmha_bwd and fmha_bwd_sm90 share it.
using FmhaBwdMainFn = cudaError_t (*)(const FmhaBwdParams&, const FmhaBwdScratch&, cudaStream_t);
cudaError_t fmha_bwd_with(const FmhaBwdParams& p, FmhaBwdMainFn main, bool dq_tiles, cudaStream_t stream);

}  // namespace mslk::attention
