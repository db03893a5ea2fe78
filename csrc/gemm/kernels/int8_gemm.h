// CUDA entry point of the INT8 x INT8 -> BF16 GEMM (i8i8bf16, i8i8bf16_dynamic). No torch
// headers: the glue (int8_gemm_cuda.cpp) fills these params.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mslk::gemm {

// out[m, n] (bf16) = bf16(float(acc) * scale), acc = sum_k x[m * ldx + k] * w[n * ldw + k] in
// int32 (wraps past 2^31, as the tensor cores do). scale: *scale_ptr when scale_ptr is set (a
// float32 on the device, read by the kernel: no host sync), else `scale`.
struct Int8GemmParams {
  const int8_t* x;
  const int8_t* w;
  void* out;
  int64_t M, N, K, ldx, ldw, ldd;
  float scale;
  const float* scale_ptr;
  // Swap AB (decode-sized M): out is then out^T [N, M] (row stride ldd), computed as W X^T with
  // a 64 x 32 tile over (N, M), so N / 64 tiles stream the weight instead of N / 128.
  bool swap = false;
};

// M at or below which the glue asks for swap AB.
inline constexpr int64_t kInt8SwapMaxM = 16;

// cudaErrorNotSupported, having launched nothing, when the kernel cannot take the problem (built
// without CUTLASS; TMA: K % 16, ldx / ldw % 16, ldd % 8, 16-byte aligned pointers; any N).
cudaError_t int8_gemm_run(const Int8GemmParams& p, cudaStream_t stream);
// The two instantiations (int8_gemm_cutlass.cu: 128 x 128 x 128 cooperative; int8_gemm_swap.cu:
// 64 x 32 x 128 ping-pong over the swapped problem).
cudaError_t int8_gemm_cutlass(const Int8GemmParams& p, cudaStream_t stream);
cudaError_t int8_gemm_cutlass_swap(const Int8GemmParams& p, cudaStream_t stream);

}  // namespace mslk::gemm
