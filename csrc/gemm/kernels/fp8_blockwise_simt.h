// Portable block/group-scaled FP8 GEMM for the results the CUTLASS and decode kernels do not
// write (float16 / float32, matmul_fp8_block's dot_out_dtype). No torch headers.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/fp8_rowwise_params.h"
#include "gemm/kernels/fp8_blockwise_decode.h"

namespace mslk::gemm {

// The contract of BlockwiseDecodeParams (any M; workspace unused), written as `out` (bf16, fp16
// or fp32). Float32 accumulation per 128-K block, each block sum scaled and added in float32.
cudaError_t fp8_blockwise_simt(const BlockwiseDecodeParams& p, OutDtype out, cudaStream_t stream);

}  // namespace mslk::gemm
