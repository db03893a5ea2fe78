// Instantiation of the split-K decode attention over folded FP8 K/V caches through register
// fragments (no ring, no shared-memory tile; fmha_decode_kernel.cuh), head dims 64 and 128.
#include "attention/kernels/fmha_decode_kernel.cuh"

namespace mslk::attention {
cudaError_t fmha_decode_regs_d64(const FmhaDecodeParams& p, cudaStream_t stream) {
  return decode_detail::launch_regs<64>(p, stream);
}
cudaError_t fmha_decode_regs_d128(const FmhaDecodeParams& p, cudaStream_t stream) {
  return decode_detail::launch_regs<128>(p, stream);
}
}  // namespace mslk::attention
