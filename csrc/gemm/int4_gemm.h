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
// undefined (bf16 X), out [B, M, N] bf16 contiguous. B, M, N, K > 0. The FP8-shuffled form
// (f8i4bf16_shuffled): scale [B, G, 8, N] float8_e4m3fn (copy 0 read), zero undefined, row_scale
// [B, N] float32, weight q * (float(scale[g, 0, n]) * row_scale[n]) in float32.
struct Int4Call {
  Tensor X, W, scale, zero, x_scale, out;
  const char* op;
  Tensor row_scale;
};

struct Int4Backend {
  void (*run)(const Int4Call&);
};

// Shared by int4_gemm.cpp and int4_shuffled.cpp: the argument names an op's messages use, the
// operand checks (X [(B,) M, K], W [(B,) N, K/2], scale / zero [(B,) G, N]; dims 2 or 3), and the
// call of the backend into a preallocated out3 [B, M, N] bf16 (contiguous; x_scale [B, M] float32
// or undefined; any size, K = 0 included; the FP8-shuffled form: s3 [B, G, 8, N], z3 undefined,
// row_scale [B, N]).
// fp8_scale: s is the [.., G, N] copy-0 view of an FP8-shuffled scale (float8_e4m3fn), z = s.
namespace int4 {
struct Names {
  const char *op, *x, *w, *s, *z;
  bool fp8_scale = false;
};
void check_operands(const Tensor& X, const Tensor& W, const Tensor& s, const Tensor& z, int64_t dims, const Names& n);
void run_into(const Int4Backend& be, const Tensor& x3, const Tensor& w3, const Tensor& s3, const Tensor& z3,
              const Tensor& x_scale, const Tensor& out3, const char* op, const Tensor& row_scale = Tensor());
}  // namespace int4

Tensor bf16i4bf16_rowwise(const Int4Backend& be, const Tensor& X, const Tensor& W, const Tensor& w_scale_group,
                          const Tensor& w_zero_group, const char* op = "bf16i4bf16_rowwise");
Tensor bf16i4bf16_rowwise_batched(const Int4Backend& be, const Tensor& X, const Tensor& WQ, const Tensor& w_scale,
                                  const Tensor& w_zp, const char* op = "bf16i4bf16_rowwise_batched");
Tensor f8i4bf16_rowwise(const Int4Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                        const Tensor& w_scale, const Tensor& w_zp);

// The preshuffled forms (int4_shuffled.cpp; the layout: docs/design/int4_gemm.md).
// f8i4bf16_shuffled: w_scale [N] float32 row scales, w_scale_group [G, 8, N] float8_e4m3fn (the 8
// copies equal; copy 0 is read), weight q * (float(w_scale_group) * w_scale[n]) in float32.
Tensor f8i4bf16_shuffled(const Int4Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                         const Tensor& w_scale, const Tensor& w_scale_group);
// Stacked grouped: X [total_M, K], WQ [E, N, K/2], M_sizes [E] rows of each group in order (read on
// the host), out [total_M, N], rows past the sum of M_sizes zero.
Tensor bf16i4bf16_shuffled_grouped(const Int4Backend& be, const Tensor& X, const Tensor& WQ,
                                   const Tensor& w_scale_group, const Tensor& w_zero_group, const Tensor& M_sizes);
Tensor f8i4bf16_shuffled_grouped(const Int4Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                                 const Tensor& w_scale, const Tensor& w_scale_group, const Tensor& M_sizes);

template <const Int4Backend* Be>
struct Int4Ops {
  using T = const Tensor&;
  static Tensor rowwise(T X, T W, T s, T z) { return bf16i4bf16_rowwise(*Be, X, W, s, z); }
  static Tensor batched(T X, T W, T s, T z) { return bf16i4bf16_rowwise_batched(*Be, X, W, s, z); }
  static Tensor f8(T XQ, T WQ, T xs, T s, T z) { return f8i4bf16_rowwise(*Be, XQ, WQ, xs, s, z); }
  static Tensor shuffled(T X, T W, T s, T z) { return bf16i4bf16_rowwise(*Be, X, W, s, z, "bf16i4bf16_shuffled"); }
  static Tensor shuffled_batched(T X, T W, T s, T z) {
    return bf16i4bf16_rowwise_batched(*Be, X, W, s, z, "bf16i4bf16_shuffled_batched");
  }
  static Tensor shuffled_grouped(T X, T W, T s, T z, T ms) { return bf16i4bf16_shuffled_grouped(*Be, X, W, s, z, ms); }
  static Tensor f8_shuffled(T XQ, T WQ, T xs, T ws, T gs) { return f8i4bf16_shuffled(*Be, XQ, WQ, xs, ws, gs); }
  static Tensor f8_shuffled_grouped(T XQ, T WQ, T xs, T ws, T gs, T ms) {
    return f8i4bf16_shuffled_grouped(*Be, XQ, WQ, xs, ws, gs, ms);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("bf16i4bf16_rowwise", &rowwise);
    m.impl("bf16i4bf16_rowwise_batched", &batched);
    m.impl("f8i4bf16_rowwise", &f8);
    m.impl("bf16i4bf16_shuffled", &shuffled);
    m.impl("bf16i4bf16_shuffled_batched", &shuffled_batched);
    m.impl("bf16i4bf16_shuffled_grouped", &shuffled_grouped);
    m.impl("f8i4bf16_shuffled", &f8_shuffled);
    m.impl("f8i4bf16_shuffled_grouped", &f8_shuffled_grouped);
  }
};

}  // namespace mslk::gemm
