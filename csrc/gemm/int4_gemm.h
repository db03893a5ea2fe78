// The INT4-weight GEMM ops (bf16i4bf16_rowwise, bf16i4bf16_rowwise_batched, f8i4bf16_rowwise),
// written once against a backend (CPU reference or CUDA).
//
// Contract (docs/design/int4_gemm.md): W [N, K/2] int8 packs two signed 4-bit values a byte (even k
// in the low nibble); group g = k / (K / G) has float scale s[g, n] and zero z[g, n] ([G, N], bf16 or
// float32), w[n, k] = fmaf(q, s, z) in float32 (one rounding). out[m, n] = bf16(float(sum_k
// x[m, k] * w[n, k])) with x the bf16 activation, or, for FP8 XQ, bf16(float(sum_k xq * w) *
// x_scale[m]). The reference sums in float64; the CUDA kernels in float32 (tolerance in the tests).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace mslk::gemm {

using at::Tensor;

// One call as the backend takes it, batch-major: X [B, M, K] (bf16 or float8_e4m3fn, unit stride
// along K), W [B, N, K/2] int8 (unit stride along K), scale / zero [B, G, N] contiguous (both bf16
// or both float32; G divides K, K / G a multiple of 32), x_scale [B, M] float32 contiguous or
// undefined (bf16 X), out [B, M, N] bf16 contiguous. B, M, N, K > 0.
struct Int4Call {
  Tensor X, W, scale, zero, x_scale, out;
  const char* op;
};

struct Int4Backend {
  void (*run)(const Int4Call&);
};

Tensor bf16i4bf16_rowwise(const Int4Backend& be, const Tensor& X, const Tensor& W, const Tensor& w_scale_group,
                          const Tensor& w_zero_group);
Tensor bf16i4bf16_rowwise_batched(const Int4Backend& be, const Tensor& X, const Tensor& WQ, const Tensor& w_scale,
                                  const Tensor& w_zp);
Tensor f8i4bf16_rowwise(const Int4Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                        const Tensor& w_scale, const Tensor& w_zp);

template <const Int4Backend* Be>
struct Int4Ops {
  static Tensor rowwise(const Tensor& X, const Tensor& W, const Tensor& s, const Tensor& z) {
    return bf16i4bf16_rowwise(*Be, X, W, s, z);
  }
  static Tensor batched(const Tensor& X, const Tensor& W, const Tensor& s, const Tensor& z) {
    return bf16i4bf16_rowwise_batched(*Be, X, W, s, z);
  }
  static Tensor f8(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& s, const Tensor& z) {
    return f8i4bf16_rowwise(*Be, XQ, WQ, xs, s, z);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("bf16i4bf16_rowwise", &rowwise);
    m.impl("bf16i4bf16_rowwise_batched", &batched);
    m.impl("f8i4bf16_rowwise", &f8);
  }
};

}  // namespace mslk::gemm
