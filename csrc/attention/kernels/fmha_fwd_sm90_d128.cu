// Instantiation of the Hopper fused attention forward for head dims padded to 128.
#include "attention/kernels/fmha_fwd_sm90_launch.cuh"

namespace mslk::attention {
cudaError_t fmha_fwd_sm90_d128(const FmhaFwdParams& p, const FmhaFwdTuning& t, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  return sm90::launch_dtype<128>(p, t, stream);
#else
  (void)p, (void)t, (void)stream;
  return cudaErrorNotSupported;
#endif
}
}  // namespace mslk::attention
