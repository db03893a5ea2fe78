// Dispatch of the fused attention backward. Placeholder until the kernels land: declines every
// problem, so the glue takes its general path.
#include "attention/kernels/fmha_bwd.h"

namespace mslk::attention {

bool fmha_bwd_supports(const FmhaBwdParams&) { return false; }

int64_t fmha_bwd_workspace_bytes(const FmhaBwdParams&) { return 0; }

cudaError_t fmha_bwd(const FmhaBwdParams&, cudaStream_t) { return cudaErrorNotSupported; }

}  // namespace mslk::attention
