// CUDA writer of the attention dropout keep-mask (fmha_dropout_mask.h): one thread per group of
// four keys, the same Philox words as the fused kernels.
#include "attention/kernels/fmha_dropout_mask.h"

namespace mslk::attention {
namespace {
__global__ void dropout_mask_kernel(FmhaDropoutMaskParams p, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n; g += stride) fmha_dropout_mask_group(p, g);
}
}  // namespace

cudaError_t fmha_dropout_mask_cuda(const FmhaDropoutMaskParams& p, cudaStream_t stream) {
  const int64_t n = fmha_dropout_mask_groups(p);
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  dropout_mask_kernel<<<unsigned(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(p, n);
  return cudaGetLastError();
}

}  // namespace mslk::attention
