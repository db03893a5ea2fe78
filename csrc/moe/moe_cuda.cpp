// CUDA backend of the MoE ops: launches the kernels on the current stream and checks the launch.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "moe/kernels/moe_kernels.h"
#include "moe/moe.h"

namespace mslk::moe {
namespace {

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

void cuda_index_shuffling(const IndexShufflingParams& p) { C10_CUDA_CHECK(index_shuffling_cuda(p, stream())); }
void cuda_gather(const GatherParams& p) { C10_CUDA_CHECK(gather_scale_cuda(p, stream())); }
void cuda_gather_quant(const GatherParams& p) { C10_CUDA_CHECK(gather_scale_quant_cuda(p, stream())); }
void cuda_scatter_add(const ScatterAddParams& p) { C10_CUDA_CHECK(scatter_add_dense_cuda(p, stream())); }
void cuda_scatter_padded(const ScatterPaddedParams& p) { C10_CUDA_CHECK(scatter_add_padded_cuda(p, stream())); }
void cuda_shuffling(const ShufflingParams& p) { C10_CUDA_CHECK(shuffling_cuda(p, stream())); }
void cuda_silu_mul(const SiluMulParams& p) { C10_CUDA_CHECK(silu_mul_cuda(p, stream())); }
void cuda_silu_mul_quant(const SiluMulParams& p) { C10_CUDA_CHECK(silu_mul_quant_cuda(p, stream())); }
bool cuda_first_dim(const ScatterFirstDimParams& p) {
  C10_CUDA_CHECK(scatter_add_first_dim_cuda(p, stream()));
  return true;
}

constexpr MoeBackend kCudaBackend{cuda_index_shuffling, cuda_gather,    cuda_gather_quant,  cuda_scatter_add,
                                  cuda_scatter_padded,  cuda_shuffling, cuda_silu_mul,      cuda_silu_mul_quant,
                                  cuda_first_dim,       /*needs_workspace=*/true};
using CudaOps = MoeOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::moe

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::moe::CudaOps::register_ops(m); }
