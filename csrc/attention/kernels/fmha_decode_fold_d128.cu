// Instantiation of the split-K decode attention over folded quantized K/V caches (FP8, INT4 with
// one group: scale and shift applied outside the MMAs) for head dims padded to 128.
#include "attention/kernels/fmha_decode_kernel.cuh"

namespace mslk::attention {
cudaError_t fmha_decode_fold_d128(const FmhaDecodeParams& p, cudaStream_t stream) {
  return decode_detail::launch_fold<128>(p, stream);
}
}  // namespace mslk::attention
