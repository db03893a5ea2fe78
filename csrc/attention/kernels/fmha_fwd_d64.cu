// Instantiation of the fused attention forward for head dims padded to 64.
#include "attention/kernels/fmha_fwd_kernel.cuh"

namespace mslk::attention {
cudaError_t fmha_fwd_d64(const FmhaFwdParams& p, cudaStream_t stream) {
  return fwd_detail::launch_dtype<64>(p, stream);
}
}  // namespace mslk::attention
