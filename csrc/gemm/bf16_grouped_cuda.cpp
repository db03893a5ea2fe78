// CUDA backend of the BF16 grouped GEMM ops: runs the contract on the current stream, with the
// group sizes read on the device (no host sync).
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "gemm/bf16_grouped.h"
#include "gemm/kernels/bf16_grouped.h"

namespace mslk::gemm {
namespace {

void cuda_run(const Bf16GroupedParams& p) {
  C10_CUDA_CHECK(bf16_grouped_run(p, c10::cuda::getCurrentCUDAStream().stream()));
}

constexpr Bf16GroupedBackend kCudaBackend{cuda_run, false};
using CudaOps = Bf16GroupedOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::gemm

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::gemm::CudaOps::register_mslk(m); }
