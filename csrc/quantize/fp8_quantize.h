// The FP8 quantize/dequantize ops, written once against a backend (CPU reference or CUDA),
// and the template that registers them for a dispatch key.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "quantize/fp8_params.h"

namespace mslk::quantize {

using at::Tensor;
using TensorPair = std::tuple<Tensor, Tensor>;

// The same contracts (fp8_params.h), implemented by each device.
struct Fp8Backend {
  void (*rows)(const Fp8TileParams&);
  void (*blocks)(const Fp8TileParams&);
  void (*groups)(const Fp8TileParams&);
  void (*tensor)(const Rows& in, uint8_t* out, float* scale, float* amax_scratch);
  void (*dequant)(const Fp8DequantParams&);
};

TensorPair quantize_fp8_row(const Fp8Backend& b, const Tensor& a, const std::optional<Tensor>& scale_ub,
                            const std::optional<Tensor>& zero_start_index_M, bool use_triton,
                            std::optional<at::Device> output_device, std::optional<int64_t> align_rows_to,
                            std::optional<double> eps_opt);
TensorPair quantize_fp8_block(const Fp8Backend& b, const Tensor& x, int64_t block_m, int64_t block_k,
                              const std::optional<Tensor>& scale_ub, bool use_triton,
                              std::optional<at::Device> output_device, bool k_major);
TensorPair quantize_fp8_tensor(const Fp8Backend& b, const Tensor& a, bool use_triton);
TensorPair quantize_fp8_group(const Fp8Backend& b, const Tensor& x, int64_t group_size,
                              const std::optional<Tensor>& scale_ub, const std::optional<Tensor>& m_sizes,
                              bool k_major);
Tensor dequantize_fp8_row(const Fp8Backend& b, const Tensor& xq, const Tensor& x_scale);
Tensor dequantize_fp8_block(const Fp8Backend& b, const Tensor& xq, const Tensor& x_scale, int64_t block_m,
                            int64_t block_k);

// Unboxed entry points bound to one backend, for m.impl.
template <const Fp8Backend* B>
struct Fp8Ops {
  static TensorPair row(const Tensor& a, const std::optional<Tensor>& ub, const std::optional<Tensor>& zs,
                        bool use_triton, std::optional<at::Device> dev, std::optional<int64_t> align,
                        std::optional<double> eps) {
    return quantize_fp8_row(*B, a, ub, zs, use_triton, dev, align, eps);
  }
  static TensorPair block(const Tensor& x, int64_t bm, int64_t bk, const std::optional<Tensor>& ub,
                          bool use_triton, std::optional<at::Device> dev, bool k_major) {
    return quantize_fp8_block(*B, x, bm, bk, ub, use_triton, dev, k_major);
  }
  static TensorPair tensor(const Tensor& a, bool use_triton) { return quantize_fp8_tensor(*B, a, use_triton); }
  static TensorPair group(const Tensor& x, int64_t gs, const std::optional<Tensor>& ub,
                          const std::optional<Tensor>& m_sizes, bool k_major) {
    return quantize_fp8_group(*B, x, gs, ub, m_sizes, k_major);
  }
  static Tensor deq_row(const Tensor& xq, const Tensor& s) { return dequantize_fp8_row(*B, xq, s); }
  static Tensor deq_block(const Tensor& xq, const Tensor& s, int64_t bm, int64_t bk) {
    return dequantize_fp8_block(*B, xq, s, bm, bk);
  }
  static void register_triton(torch::Library& m) {
    m.impl("quantize_fp8_row", &row);
    m.impl("quantize_fp8_block", &block);
    m.impl("quantize_fp8_tensor", &tensor);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("quantize_fp8_group", &group);
    m.impl("dequantize_fp8_row", &deq_row);
    m.impl("dequantize_fp8_block", &deq_block);
  }
};

}  // namespace mslk::quantize
