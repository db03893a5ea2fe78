// Instantiation of the Hopper attention backward for head dim 256 (fmha_bwd_sm90_d256_kernel.cuh).
#include "attention/kernels/fmha_bwd_sm90_launch.cuh"

namespace mslk::attention {
cudaError_t fmha_bwd_sm90_d256(const FmhaBwdParams& p, const FmhaBwdScratch& w, cudaStream_t stream) {
#if MSLK_HAS_CUTLASS
  return p.is_bf16 ? sm90_bwd::launch_d256<cutlass::bfloat16_t>(p, w, stream)
                   : sm90_bwd::launch_d256<cutlass::half_t>(p, w, stream);
#else
  (void)p, (void)w, (void)stream;
  return cudaErrorNotSupported;
#endif
}
}  // namespace mslk::attention
