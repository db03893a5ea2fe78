// Native entry points of mslk's INT4-weight GEMMs (spec: "C++ - Native GEMM declarations"),
// callable from C++ without Python. Each calls the same-name torch.ops.mslk op through the
// dispatcher, so the CPU reference or the CUDA kernel runs by the inputs' device. Link against
// libmslk.so (which registers the ops when it is loaded).
//
// W [N, K/2] int8 holds two signed int4 values a byte (even k in the low nibble, mslk.quantize.shuffle
// .pack_int4); scales and zeros are [K/group, N] (bf16 or float32, the same dtype), the group size
// K / (K/group) a multiple of 32; a weight is q * scale + zero.
#pragma once
#include <ATen/core/Tensor.h>

#include <tuple>

namespace mslk::gemm {

// out [M, N] bf16 = X [M, K] (bf16) @ dequant(W)^T.
at::Tensor bf16i4bf16_rowwise(at::Tensor X, at::Tensor W, at::Tensor w_scale_group, at::Tensor w_zero_group);
// The batched form: X [B, M, K], WQ [B, N, K/2], w_scale / w_zp [B, K/group, N] -> [B, M, N].
at::Tensor bf16i4bf16_rowwise_batched(at::Tensor X, at::Tensor WQ, at::Tensor w_scale, at::Tensor w_zp);
// out [M, N] bf16 = x_scale[m] * (XQ [M, K] (float8_e4m3fn) @ dequant(WQ)^T), x_scale [M] float32.
at::Tensor f8i4bf16_rowwise(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale, at::Tensor w_zp);


// The preshuffled forms. preshuffle_i4 (once, on the weights): WQ [(E,) N, K/2] and its group scale
// [(E,) K/group, N]; returns the shuffled weight and, for a float8_e4m3fn scale, the [(E,) K/group, 8,
// N] form the FP8 ops take (a bf16 / float32 scale comes back as it is).
std::tuple<at::Tensor, at::Tensor> preshuffle_i4(at::Tensor WQ, at::Tensor w_scale);
// As bf16i4bf16_rowwise / _batched over a preshuffled weight.
at::Tensor bf16i4bf16_shuffled(at::Tensor X, at::Tensor W, at::Tensor w_scale_group, at::Tensor w_zero_group);
at::Tensor bf16i4bf16_shuffled_batched(at::Tensor X, at::Tensor WQ, at::Tensor w_scale, at::Tensor w_zp);
// out [M, N] = x_scale[m] * w_scale[n] * (XQ @ (q * w_scale_group)^T): w_scale [N] float32 row
// scales, w_scale_group [K/group, 8, N] float8_e4m3fn (from preshuffle_i4), no zero point.
at::Tensor f8i4bf16_shuffled(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                             at::Tensor w_scale_group);
// Stacked grouped: X [total_M, K], WQ [E, N, K/2], scales [E, ...], M_sizes [E] (rows of each group,
// in order; read on the host) -> [total_M, N], rows past the sum zero.
at::Tensor bf16i4bf16_shuffled_grouped(at::Tensor X, at::Tensor WQ, at::Tensor w_scale_group,
                                       at::Tensor w_zero_group, at::Tensor M_sizes);
at::Tensor f8i4bf16_shuffled_grouped(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                     at::Tensor w_scale_group, at::Tensor M_sizes);

}  // namespace mslk::gemm
