// CUDA entry point of the INT8 x INT8 -> BF16 GEMM (i8i8bf16, i8i8bf16_dynamic). No torch
// headers: the glue (int8_gemm_cuda.cpp) fills these params.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemm/kernels/int8_gemm_configs.h"

namespace mslk::gemm {

// out[m, n] (bf16, row stride ldd) = bf16(float(acc) * scale), acc = sum_k x[m * ldx + k] *
// w[n * ldw + k] in int32 (wraps past 2^31, as the tensor cores do). scale: *scale_ptr when
// scale_ptr is set (a float32 on the device, read by the kernel: no host sync), else `scale`.
// M <= kInt8SwapMaxM runs the swap row of int8_gemm_configs.h (out^T = W X^T, written into out).
struct Int8GemmParams {
  const int8_t* x;
  const int8_t* w;
  void* out;
  int64_t M, N, K, ldx, ldw, ldd;
  float scale;
  const float* scale_ptr;
};

// cudaErrorNotSupported, having launched nothing, when the kernel cannot take the problem (built
// without CUTLASS; TMA: K % 16, ldx / ldw % 16, ldd % 8, 16-byte aligned pointers; any M, N).
cudaError_t int8_gemm_run(const Int8GemmParams& p, cudaStream_t stream);

// Row ID of int8_gemm_configs.h (one kernel TU each).
template <int ID>
cudaError_t int8_gemm_row(const Int8GemmParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
