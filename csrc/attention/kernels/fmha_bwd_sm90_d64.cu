// Instantiation of the Hopper attention backward for head dim 64.
#include "attention/kernels/fmha_bwd_sm90_launch.cuh"

namespace mslk::attention {
cudaError_t fmha_bwd_sm90_d64(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  return sm90_bwd::launch_library<64>(p, w, stream);
#else
  (void)p, (void)w, (void)stream;
  return cudaErrorNotSupported;
#endif
}
}  // namespace mslk::attention
