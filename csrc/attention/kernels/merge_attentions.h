// Launchers of the attention-merge kernels (torch-free; contract in attention/merge_params.h).
#pragma once
#include <cuda_runtime.h>

#include "attention/merge_params.h"

namespace mslk::attention {
cudaError_t merge_attentions_fwd(const MergeFwdParams& p, cudaStream_t stream);
cudaError_t merge_attentions_bwd(const MergeBwdParams& p, cudaStream_t stream);
}  // namespace mslk::attention
