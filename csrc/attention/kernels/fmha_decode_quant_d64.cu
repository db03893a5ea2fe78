// Instantiation of the split-K decode attention over quantized K/V caches (FP8, INT4) for head
// dims padded to 64.
#include "attention/kernels/fmha_decode_kernel.cuh"

namespace mslk::attention {
cudaError_t fmha_decode_quant_d64(const FmhaDecodeParams& p, cudaStream_t stream) {
  return decode_detail::launch_quant<64>(p, stream);
}
}  // namespace mslk::attention
