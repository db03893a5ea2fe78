// CUDA dequantization of quantized K/V cache rows (kv_dequant.h): one thread per data word.
// The decode path runs it into a bf16 / fp16 temporary, then the unquantized split-K kernel; a
// fused in-kernel dequant is later work (docs/design/attention_decode.md).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/kernels/kv_dequant.h"

namespace mslk::attention {
namespace {

__device__ __forceinline__ void kvq_store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void kvq_store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ void kvq_store(float* p, float x) { *p = x; }

template <class OutT>
__global__ void kv_dequant_kernel(KvDequantParams p, int64_t words, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  OutT* out = static_cast<OutT*>(p.out);
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += stride) {
    const int64_t row = t / words, w = t % words;
    kv_dequant_word(p, row, w, [&](int64_t i, float x) { kvq_store(out + row * p.head_dim + i, x); });
  }
}

template <class OutT>
cudaError_t launch(const KvDequantParams& p, cudaStream_t stream) {
  const int64_t words = kv_dequant_words(p), n = p.rows * words;
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  kv_dequant_kernel<OutT><<<unsigned(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(p, words, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t kv_dequant_cuda(const KvDequantParams& p, int out_dtype, cudaStream_t stream) {
  switch (out_dtype) {
    case 0: return launch<__half>(p, stream);
    case 1: return launch<__nv_bfloat16>(p, stream);
    case 2: return launch<float>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace mslk::attention
