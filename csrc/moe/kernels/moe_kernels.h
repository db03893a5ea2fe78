// Launchers of the MoE kernels (no torch headers: raw pointers and sizes, moe_params.h).
// Every launcher enqueues on `s` only (no host synchronisation: CUDA-graph safe).
#pragma once
#include <cuda_runtime.h>

#include "moe/moe_params.h"

namespace mslk::moe {

cudaError_t index_shuffling_cuda(const IndexShufflingParams& p, cudaStream_t s);
cudaError_t gather_scale_cuda(const GatherParams& p, cudaStream_t s);
cudaError_t gather_scale_quant_cuda(const GatherParams& p, cudaStream_t s);
cudaError_t scatter_add_dense_cuda(const ScatterAddParams& p, cudaStream_t s);
cudaError_t scatter_add_padded_cuda(const ScatterPaddedParams& p, cudaStream_t s);
cudaError_t shuffling_cuda(const ShufflingParams& p, cudaStream_t s);
cudaError_t silu_mul_cuda(const SiluMulParams& p, cudaStream_t s);
cudaError_t silu_mul_quant_cuda(const SiluMulParams& p, cudaStream_t s);
cudaError_t scatter_add_first_dim_cuda(const ScatterFirstDimParams& p, cudaStream_t s);

}  // namespace mslk::moe
