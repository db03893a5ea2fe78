// CPU reference of bf16x9_gemm: the exact FP32 GEMM the BF16 parts emulate. The products of two
// float32 values are exact in double and the sums carry 53 bits, then one rounding to float32;
// the CUDA kernel's FP32 accumulation of the nine BF16 products is measured against this.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "gemm/bf16x9.h"

namespace mslk::gemm {
namespace {

void cpu_run(const Tensor& A, const Tensor& B, const Tensor& out) {
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  const int64_t lda = A.stride(0), ldb = B.stride(0), ldd = out.stride(0);
  const float* a = A.const_data_ptr<float>();
  const float* b = B.const_data_ptr<float>();
  float* d = out.data_ptr<float>();
  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const float* ar = a + m * lda;
        const float* br = b + n * ldb;
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(ar[k]) * static_cast<double>(br[k]);
        d[m * ldd + n] = static_cast<float>(acc);
      }
  });
}

constexpr Bf16x9Backend kCpuBackend{cpu_run};

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CPU, m) { mslk::gemm::Bf16x9Ops<&mslk::gemm::kCpuBackend>::register_mslk(m); }
