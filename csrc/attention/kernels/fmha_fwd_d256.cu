// Instantiation of the fused attention forward for head dims padded to 256.
#include "attention/kernels/fmha_fwd_kernel.cuh"

namespace mslk::attention {
cudaError_t fmha_fwd_d256(const FmhaFwdParams& p, cudaStream_t stream) {
  return fwd_detail::launch_dtype<256>(p, stream);
}
}  // namespace mslk::attention
