// Native entry points of mslk's FP8 GEMMs, rowwise and block/group-scaled (spec: "C++ - Native
// GEMM declarations - FP8 & BF16"), callable from C++ without Python. Each one calls the same-name
// torch.ops.mslk op through the dispatcher, so the CPU reference or the CUDA kernel runs by the
// inputs' device. Link against libmslk.so (which registers the ops when it is loaded).
//
// Rowwise contract: out[..., m, n] = x_scale[..., m] * w_scale[n] * sum_k XQ[..., m, k] * WQ[n, k]
// (+ bias[n]), XQ / WQ float8_e4m3fn with unit stride along K, scales float32, bias bf16 or
// float32, output bf16 (fp16 for f8f8f16_rowwise).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

namespace mslk::gemm {

at::Tensor f8f8bf16_rowwise(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                            std::optional<at::Tensor> bias = std::nullopt, bool use_fast_accum = true);
void f8f8bf16_rowwise_out(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale, at::Tensor output,
                          std::optional<at::Tensor> bias = std::nullopt, bool use_fast_accum = true);
at::Tensor f8f8f16_rowwise(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                           std::optional<at::Tensor> bias = std::nullopt, bool use_fast_accum = true);
// The spec's ROCm preshuffled rowwise GEMMs, on every device here: the preshuffled weight is the
// row-major [N, K] one that mslk.quantize.shuffle.ck_preshuffle returns (Hopper's TMA loads apply
// the shared-memory swizzle themselves), and the math is f8f8bf16_rowwise's / f8f8f16_rowwise's.
at::Tensor f8f8bf16_rowwise_preshuffle(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                       std::optional<at::Tensor> bias = std::nullopt, bool use_fast_accum = true);
at::Tensor f8f8f16_rowwise_preshuffle(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                      std::optional<at::Tensor> bias = std::nullopt, bool use_fast_accum = true);
at::Tensor f8f8bf16_rowwise_batched(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                    std::optional<at::Tensor> bias = std::nullopt, bool use_fast_accum = true,
                                    std::optional<at::Tensor> output = std::nullopt);
std::vector<at::Tensor> f8f8bf16_rowwise_grouped(at::TensorList XQ, at::TensorList WQ, at::TensorList x_scale,
                                                 at::TensorList w_scale);
at::Tensor f8f8bf16_rowwise_grouped_cat(at::TensorList XQ, at::TensorList WQ, at::TensorList x_scale,
                                        at::TensorList w_scale);
at::Tensor f8f8bf16_rowwise_grouped_stacked(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                            at::Tensor M_sizes);
at::Tensor f8f8bf16_rowwise_grouped_dynamic(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                            at::Tensor zero_start_index_M, bool zeroing_output_tensor = true);
// Spec: "C++ - Native offset-grouped GEMM declarations". Writes into and returns `output`.
at::Tensor f8f8bf16_rowwise_grouped_mm(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                       std::optional<at::Tensor> offsets, at::Tensor& output);

// Block/group-scaled FP8 GEMMs: out[m, n] = sum over K blocks kb of
// x_scale(m, kb) * w_scale(n, kb) * sum_{k in kb} XQ[m, k] * WQ[n, k], bf16 output.
// f8f8bf16_blockwise: x_scale [ceil(M/block_m), ceil(K/block_k)], w_scale [ceil(N/block_n), ceil(K/block_k)].
at::Tensor f8f8bf16_blockwise(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                              int64_t block_m = 128, int64_t block_n = 128, int64_t block_k = 128);
// f8f8bf16_groupwise: x_scale [K/128, M], w_scale [K/128, N/128] (both MN-major).
at::Tensor f8f8bf16_groupwise(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale);
// XQ [total_M, K], WQ [G, N, K], x_scale [total_M, K/128] (M-major inside each group's rows),
// w_scale [G, K/128, N/128], M_sizes [G].
at::Tensor f8f8bf16_groupwise_grouped(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                      at::Tensor M_sizes);

}  // namespace mslk::gemm
