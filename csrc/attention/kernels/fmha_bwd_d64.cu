// Instantiation of the fused attention backward for head dims padded to 64.
#include "attention/kernels/fmha_bwd_launch.cuh"

namespace mslk::attention {
cudaError_t fmha_bwd_d64(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  return bwd_detail::launch_dtype<64>(p, w, stream);
}
}  // namespace mslk::attention
