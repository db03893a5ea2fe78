// The block/group-scaled FP8 GEMM ops (f8f8bf16_blockwise, f8f8bf16_groupwise,
// f8f8bf16_groupwise_grouped, triton::matmul_fp8_block), written once against a backend (CPU
// reference or CUDA) that runs one call of the contract below, and the template that registers them.
//
// Contract of one call: out[m, n] = sum over K blocks kb of
//   xs[m / block_m, kb'] * ws[n / block_n, kb'] * sum_{k in block kb} A[m, k] * B[n, k],
// kb' = the scale block of K holding k (block_k wide), bf16 output rounded once at the end.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>

#include "gemm/fp8_grouped_params.h"

namespace mslk::gemm {

using at::Tensor;

// One GEMM as the backend takes it. A [M, K] and B [N, K] float8_e4m3fn with unit stride along K;
// out [M, N] bf16 with unit stride along N; xs [ceil(M / block_m), ceil(K / block_k)] and
// ws [ceil(N / block_n), ceil(K / block_k)] float32 views of any strides. M, N, K > 0.
struct BlockwiseCall {
  Tensor A, B, out, xs, ws;
  int64_t block_m, block_n, block_k;
  const char* op;  // for error messages
};

// run: one GEMM. grouped (null on the CPU): the grouped form along M with its sizes on the
// device (kernels/fp8_blockwise.h, fp8_blockwise_grouped_run); false when it cannot take the call
// (nothing run), and the glue then reads the sizes to the host and runs one GEMM a group.
struct BlockwiseBackend {
  void (*run)(const BlockwiseCall&);
  bool (*grouped)(const Fp8GroupedParams&) = nullptr;
};

Tensor f8f8bf16_blockwise(const BlockwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                          const Tensor& w_scale, int64_t block_m, int64_t block_n, int64_t block_k);
Tensor f8f8bf16_groupwise(const BlockwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                          const Tensor& w_scale);
Tensor f8f8bf16_groupwise_grouped(const BlockwiseBackend& b, const Tensor& XQ, const Tensor& WQ,
                                  const Tensor& x_scale, const Tensor& w_scale, const Tensor& M_sizes);
Tensor matmul_fp8_block(const BlockwiseBackend& b, const Tensor& a, const Tensor& bmat, const Tensor& a_scale,
                        const Tensor& b_scale, int64_t scale_block_m, int64_t scale_block_n, int64_t scale_block_k,
                        std::optional<at::ScalarType> dot_out_dtype, bool allow_tf32, bool fp8_fast_accum);

// Unboxed entry points bound to one backend, for m.impl.
template <const BlockwiseBackend* B>
struct BlockwiseOps {
  static Tensor blockwise(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws, int64_t bm,
                          int64_t bn, int64_t bk) {
    return f8f8bf16_blockwise(*B, XQ, WQ, xs, ws, bm, bn, bk);
  }
  static Tensor groupwise(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws) {
    return f8f8bf16_groupwise(*B, XQ, WQ, xs, ws);
  }
  static Tensor grouped(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws, const Tensor& ms) {
    return f8f8bf16_groupwise_grouped(*B, XQ, WQ, xs, ws, ms);
  }
  static Tensor triton_block(const Tensor& a, const Tensor& b, const Tensor& as, const Tensor& bs, int64_t bm,
                             int64_t bn, int64_t bk, std::optional<at::ScalarType> dot_out_dtype, bool allow_tf32,
                             bool fast) {
    return matmul_fp8_block(*B, a, b, as, bs, bm, bn, bk, dot_out_dtype, allow_tf32, fast);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("f8f8bf16_blockwise", &blockwise);
    m.impl("f8f8bf16_groupwise", &groupwise);
    m.impl("f8f8bf16_groupwise_grouped", &grouped);
  }
  static void register_triton(torch::Library& m) { m.impl("matmul_fp8_block", &triton_block); }
};

}  // namespace mslk::gemm
