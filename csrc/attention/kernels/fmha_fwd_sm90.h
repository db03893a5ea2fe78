// Hopper (sm_90a) fused attention forward: TMA + wgmma, warp-specialised (see
// fmha_fwd_sm90_kernel.cuh). Same FmhaFwdParams contract as the FA2 kernel for the problems that
// fmha_fwd_sm90_supports() accepts; the launchers return cudaErrorNotSupported (launching nothing)
// for anything else, so the dispatcher can fall back to the FA2 kernel.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/kernels/fmha_fwd.h"

namespace mslk::attention {

// Padded head dim the sm90 kernel would use (64, 128 or 256), or 0 when it cannot run the problem:
// dropout, paged K/V outside varlen mode, K or Kv > 256 or not a multiple of 8, TMA-incompatible addresses or strides
// (16-byte aligned base, row/head/batch strides multiples of 8 elements, a stride-0 row dim only
// when that dim has one row), or a build without CUTLASS. Host-only; reads no device memory.
int fmha_fwd_sm90_head_dim(const FmhaFwdParams& p);
inline bool fmha_fwd_sm90_supports(const FmhaFwdParams& p) { return fmha_fwd_sm90_head_dim(p) != 0; }

// Runs the problem on the current device (which must be sm_90); cudaErrorNotSupported when
// !fmha_fwd_sm90_supports(p) or the head dim does not match the instantiation.
cudaError_t fmha_fwd_sm90(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream);
// Workspace bytes fmha_fwd_sm90 would use for p (its stream-K tail; 0 when it takes none or cannot
// run p). Host-only.
int64_t fmha_fwd_sm90_workspace_bytes(const FmhaFwdParams& p, const FmhaFwdTuning& t);
cudaError_t fmha_fwd_sm90_d64(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream);
cudaError_t fmha_fwd_sm90_d128(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream);
cudaError_t fmha_fwd_sm90_d256(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream);
// A row `cfg` of kTileCfgs (fmha_fwd_sm90_configs.h) other than its head dim's default, for
// problems of that head dim.
cudaError_t fmha_fwd_sm90_variant(int cfg, const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream);

// Rows of kTileCfgs (the range of FmhaFwdTuning::sm90_cfg).
int fmha_fwd_sm90_num_cfgs();

}  // namespace mslk::attention
