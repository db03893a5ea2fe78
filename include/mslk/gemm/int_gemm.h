// Native entry points of mslk's integer and exact-FP32 GEMMs (spec: "C++ - Native GEMM
// declarations"), callable from C++ without Python. Each calls the same-name torch.ops.mslk op
// through the dispatcher, so the CPU reference or the CUDA kernel runs by the inputs' device.
// Link against libmslk.so (which registers the ops when it is loaded).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace mslk::gemm {

// out [M, N] bf16 = bf16(float(int32 sum_k XQ[m, k] * WQ[n, k]) * scale); XQ [M, K], WQ [N, K]
// int8, K % 16 == 0. split_k >= 1 is accepted and changes nothing (the int32 sum is exact).
at::Tensor i8i8bf16(at::Tensor XQ, at::Tensor WQ, double scale, int64_t split_k);
// The same with `scale` a float32 tensor of one element on the operands' device.
at::Tensor i8i8bf16_dynamic(at::Tensor XQ, at::Tensor WQ, at::Tensor scale, int64_t split_k = 1);

// out [M, N] float32 = A [M, K] @ B [N, K]^T, float32 operands; on Hopper computed from three BF16
// parts of each operand (nine BF16 tensor-core products, FP32 accumulation). Writes into and
// returns `output` when given.
at::Tensor bf16x9_gemm(at::Tensor A, at::Tensor B, std::optional<at::Tensor> output = std::nullopt);

}  // namespace mslk::gemm
