// CUDA backend of the rowwise FP8 GEMM ops: runs the contract on the current stream.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "gemm/fp8_rowwise.h"
#include "gemm/kernels/fp8_rowwise.h"

namespace mslk::gemm {
namespace {

void cuda_run(const RowwiseGemmParams& p) {
  C10_CUDA_CHECK(fp8_rowwise_run(p, c10::cuda::getCurrentCUDAStream().stream()));
}

constexpr RowwiseBackend kCudaBackend{cuda_run};
using CudaOps = RowwiseOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
TORCH_LIBRARY_IMPL(triton, CUDA, m) { mslk::gemm::CudaOps::register_triton(m); }
