// Head-dim dispatch of the fused attention forward: the smallest instantiation whose padded head
// dim holds both K and Kv (extra columns are zero-filled on load and skipped where possible).
#include "attention/kernels/fmha_fwd.h"

namespace mslk::attention {
cudaError_t fmha_fwd(const FmhaFwdParams& p, cudaStream_t stream) {
  const int d = p.K > p.Kv ? p.K : p.Kv;
  if (d <= 0 || d > 256 || p.K % 8 != 0 || p.Kv % 8 != 0) return cudaErrorInvalidValue;
  if (d <= 64) return fmha_fwd_d64(p, stream);
  if (d <= 128) return fmha_fwd_d128(p, stream);
  return fmha_fwd_d256(p, stream);
}
}  // namespace mslk::attention
