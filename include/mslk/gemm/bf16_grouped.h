// Native entry points of mslk's BF16 grouped GEMMs (spec: "GEMM - BF16 grouped torch ops";
// "C++ - Native GEMM declarations - FP8 & BF16"), callable from C++ without Python. Each one
// calls the same-name torch.ops.mslk op through the dispatcher, so the CPU reference or the
// CUDA kernel runs by the inputs' device. Link against libmslk.so.
//
// Layouts (bf16, unit stride along the last dim; M_sizes int32/int64 [G] on X's device):
//   grouped_stacked: X [total_M, K], W [G, N, K] -> [total_M, N], rows of group g = X_g @ W[g]^T
//   grouped_grad:    X = dY [total_M, N], W [G, N, K] -> dX [total_M, K] = dY_g @ W[g]
//   grouped_wgrad:   X = dY [total_M, N], W = X_act [total_M, K] -> dW [G, N, K] = dY_g^T @ X_g
//                    (output_accum: output, float32 [G, N, K], += dW)
// Rows past sum(M_sizes) are zero in the stacked/grad outputs and ignored by wgrad.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

namespace mslk::gemm {

std::vector<at::Tensor> bf16bf16bf16_grouped(at::TensorList X, at::TensorList W);
at::Tensor bf16bf16bf16_grouped_cat(at::TensorList X, at::TensorList W);
at::Tensor bf16bf16bf16_grouped_dynamic(at::Tensor X, at::Tensor W, at::Tensor zero_start_index_M);
at::Tensor bf16bf16bf16_grouped_stacked(at::Tensor X, at::Tensor W, at::Tensor M_sizes,
                                        std::optional<at::Tensor> out = std::nullopt,
                                        std::optional<int64_t> num_sms = std::nullopt);
at::Tensor bf16bf16bf16_grouped_grad(at::Tensor X, at::Tensor W, at::Tensor M_sizes,
                                     std::optional<at::Tensor> out = std::nullopt,
                                     std::optional<int64_t> num_sms = std::nullopt);
at::Tensor bf16bf16bf16_grouped_wgrad(at::Tensor X, at::Tensor W, at::Tensor M_sizes,
                                      std::optional<at::Tensor> output = std::nullopt, bool output_accum = false,
                                      std::optional<int64_t> num_sms = std::nullopt);

}  // namespace mslk::gemm
