// CUDA backend of the rowwise FP8 GEMM ops: runs the contract on the current stream.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>

#include "gemm/fp8_rowwise.h"
#include "gemm/kernels/fp8_grouped.h"
#include "gemm/kernels/fp8_rowwise.h"

namespace mslk::gemm {
namespace {

void cuda_run(const RowwiseGemmParams& p) {
  C10_CUDA_CHECK(fp8_rowwise_run(p, c10::cuda::getCurrentCUDAStream().stream()));
}

// MSLK_FP8_GROUPED_KERNEL=host: one GEMM per group with the sizes read to the host (the old
// path, kept to compare against); default: the device-side grouped kernel when it applies.
bool cuda_grouped(const Fp8GroupedParams& p) {
  const char* k = std::getenv("MSLK_FP8_GROUPED_KERNEL");
  if (k && std::strcmp(k, "host") == 0) return false;
  const cudaError_t e = fp8_grouped_cutlass_run(p, c10::cuda::getCurrentCUDAStream().stream());
  if (e == cudaErrorNotSupported) return false;  // nothing launched
  C10_CUDA_CHECK(e);
  return true;
}

constexpr RowwiseBackend kCudaBackend{cuda_run, cuda_grouped};
using CudaOps = RowwiseOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
TORCH_LIBRARY_IMPL(triton, CUDA, m) { mslk::gemm::CudaOps::register_triton(m); }
