// Instantiation of the fused attention backward for head dims padded to 128.
#include "attention/kernels/fmha_bwd_launch.cuh"

namespace mslk::attention {
cudaError_t fmha_bwd_d128(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
  return bwd_detail::launch_dtype<128>(p, w, stream);
}
}  // namespace mslk::attention
