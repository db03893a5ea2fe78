// CUDA backend of the attention-merge ops: the kernels of kernels/merge_attentions.cu.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "attention/kernels/merge_attentions.h"
#include "attention/merge_attentions.h"

namespace mslk::attention {
namespace {

void cuda_fwd(const MergeFwdParams& p) {
  C10_CUDA_CHECK(merge_attentions_fwd(p, c10::cuda::getCurrentCUDAStream().stream()));
}
void cuda_bwd(const MergeBwdParams& p) {
  C10_CUDA_CHECK(merge_attentions_bwd(p, c10::cuda::getCurrentCUDAStream().stream()));
}

constexpr MergeBackend kCudaBackend{cuda_fwd, cuda_bwd};
using CudaOps = MergeOps<&kCudaBackend>;

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { mslk::attention::CudaOps::register_mslk(m); }
