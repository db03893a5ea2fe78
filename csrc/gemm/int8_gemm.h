// The INT8 x INT8 -> BF16 GEMM ops (i8i8bf16 with a float scale, i8i8bf16_dynamic with a float32
// one-element tensor scale), written once against a backend (CPU reference or CUDA).
//
// Contract: out[m, n] = bf16(float(acc) * scale), acc = sum_k XQ[m, k] * WQ[n, k] in int32 (two's
// complement wrap past 2^31, as the tensor cores accumulate; K * 127 * 128 stays below 2^31 for
// K < 131072), scale rounded to float32. split_k is validated and otherwise a no-op: the int32
// sum is exact, so no split changes the result.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace mslk::gemm {

using at::Tensor;

// One call as the backend takes it: XQ [M, K], WQ [N, K] int8 with unit stride along K, out
// [M, N] bf16 contiguous, scale_t a float32 tensor of one element on the operands' device or
// undefined (then `scale`). M, N, K > 0.
struct Int8Call {
  Tensor XQ, WQ, out;
  float scale;
  Tensor scale_t;
  const char* op;
};

struct Int8Backend {
  void (*run)(const Int8Call&);
};

Tensor i8i8bf16(const Int8Backend& be, const Tensor& XQ, const Tensor& WQ, double scale, int64_t split_k);
Tensor i8i8bf16_dynamic(const Int8Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& scale,
                        int64_t split_k);

template <const Int8Backend* Be>
struct Int8Ops {
  static Tensor fixed(const Tensor& XQ, const Tensor& WQ, double scale, int64_t split_k) {
    return i8i8bf16(*Be, XQ, WQ, scale, split_k);
  }
  static Tensor dynamic(const Tensor& XQ, const Tensor& WQ, const Tensor& scale, int64_t split_k) {
    return i8i8bf16_dynamic(*Be, XQ, WQ, scale, split_k);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("i8i8bf16", &fixed);
    m.impl("i8i8bf16_dynamic", &dynamic);
  }
};

}  // namespace mslk::gemm
