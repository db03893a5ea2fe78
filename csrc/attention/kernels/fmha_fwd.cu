// Kernel choice (FmhaFwdTuning::kernel) and head-dim dispatch of the fused attention forward. The
// FA2 kernel takes the smallest instantiation whose padded head dim holds both K and Kv (extra
// columns are zero-filled on load and skipped where possible).
#include "attention/kernels/fmha_fwd.h"
#include "attention/kernels/fmha_fwd_sm90.h"

namespace mslk::attention {
int64_t fmha_fwd_workspace_bytes(const FmhaFwdParams& p, const FmhaFwdTuning& t) {
  return t.kernel != FmhaKernelChoice::kSm80 ? fmha_fwd_sm90_workspace_bytes(p, t) : 0;
}

cudaError_t fmha_fwd(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream) {
  const int d = p.K > p.Kv ? p.K : p.Kv;
  if (d <= 0 || d > 256 || p.K % 8 != 0 || p.Kv % 8 != 0) return cudaErrorInvalidValue;
  // Dropout indexes keys by their row in the packed K; paged K/V has no such row (the glue rejects it).
  if (p.dropout.p > 0.f && p.block_table != nullptr) return cudaErrorNotSupported;
  switch (t.kernel) {
    case FmhaKernelChoice::kSm90:
      return fmha_fwd_sm90(p, t, stream);  // cudaErrorNotSupported: the glue names the env var
    case FmhaKernelChoice::kAuto:
      if (fmha_fwd_sm90_supports(p)) {
        const cudaError_t err = fmha_fwd_sm90(p, t, stream);  // checks the device is sm_90
        if (err != cudaErrorNotSupported) return err;
      }
      break;
    case FmhaKernelChoice::kSm80:
      break;
  }
  if (d <= 64) return fmha_fwd_d64(p, stream);
  if (d <= 128) return fmha_fwd_d128(p, stream);
  return fmha_fwd_d256(p, stream);
}
}  // namespace mslk::attention
