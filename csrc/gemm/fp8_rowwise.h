// The rowwise FP8 GEMM ops, written once against a backend (CPU reference or CUDA) that runs
// the single contract of fp8_rowwise_params.h, and the template that registers them.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "gemm/fp8_grouped_params.h"
#include "gemm/fp8_rowwise_params.h"

namespace mslk::gemm {

using at::Tensor;
using at::TensorList;

struct RowwiseBackend {
  void (*run)(const RowwiseGemmParams&);
  // Device-side grouped GEMM (fp8_grouped_params.h), or null. Returns false, having done
  // nothing, when it cannot take the problem: the glue then runs one GEMM per group.
  bool (*grouped)(const Fp8GroupedParams&);
};

Tensor rowwise(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
               const Tensor& w_scale, const std::optional<Tensor>& bias, bool use_fast_accum, OutDtype out,
               const char* op);
void rowwise_out(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                 const Tensor& w_scale, const Tensor& output, const std::optional<Tensor>& bias, bool use_fast_accum);
Tensor rowwise_batched(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                       const Tensor& w_scale, const std::optional<Tensor>& bias, bool use_fast_accum,
                       const std::optional<Tensor>& output);
std::vector<Tensor> rowwise_grouped(const RowwiseBackend& b, TensorList XQ, TensorList WQ, TensorList x_scale,
                                    TensorList w_scale, const char* op);
Tensor rowwise_grouped_cat(const RowwiseBackend& b, TensorList XQ, TensorList WQ, TensorList x_scale,
                           TensorList w_scale);
Tensor rowwise_grouped_stacked(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                               const Tensor& w_scale, const Tensor& M_sizes);
Tensor rowwise_grouped_dynamic(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                               const Tensor& w_scale, const Tensor& zero_start_index_M, bool zeroing_output_tensor);
Tensor rowwise_grouped_mm(const RowwiseBackend& b, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                          const Tensor& w_scale, const std::optional<Tensor>& offsets,
                          const std::optional<Tensor>& output);
Tensor matmul_fp8_row(const RowwiseBackend& b, const Tensor& a, const Tensor& bmat, const Tensor& a_scale,
                      const Tensor& b_scale, const std::optional<Tensor>& bias,
                      std::optional<at::ScalarType> dot_out_dtype, bool allow_tf32, bool fp8_fast_accum,
                      bool imprecise_acc, bool tma_persistent, std::optional<bool> no_use_persistent,
                      bool use_warp_specialization);

// Unboxed entry points bound to one backend, for m.impl.
template <const RowwiseBackend* B>
struct RowwiseOps {
  static Tensor bf16(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                     const std::optional<Tensor>& bias, bool fast) {
    return rowwise(*B, XQ, WQ, xs, ws, bias, fast, OutDtype::kBFloat16, "f8f8bf16_rowwise");
  }
  static Tensor f16(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                    const std::optional<Tensor>& bias, bool fast) {
    return rowwise(*B, XQ, WQ, xs, ws, bias, fast, OutDtype::kFloat16, "f8f8f16_rowwise");
  }
  // The preshuffled forms read the layout ck_preshuffle writes, the row-major one.
  static Tensor preshuffle_bf16(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                                const std::optional<Tensor>& bias, bool fast) {
    return rowwise(*B, XQ, WQ, xs, ws, bias, fast, OutDtype::kBFloat16, "f8f8bf16_rowwise_preshuffle");
  }
  static Tensor preshuffle_f16(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                               const std::optional<Tensor>& bias, bool fast) {
    return rowwise(*B, XQ, WQ, xs, ws, bias, fast, OutDtype::kFloat16, "f8f8f16_rowwise_preshuffle");
  }
  static void out(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws, const Tensor& output,
                  const std::optional<Tensor>& bias, bool fast) {
    rowwise_out(*B, XQ, WQ, xs, ws, output, bias, fast);
  }
  // The ops with an optional output register as their internal pair (common/out_router.h).
  static Tensor batched_new(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                            const std::optional<Tensor>& bias, bool fast) {
    return rowwise_batched(*B, XQ, WQ, xs, ws, bias, fast, std::nullopt);
  }
  static void batched_into(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                           const std::optional<Tensor>& bias, bool fast, const Tensor& output) {
    rowwise_batched(*B, XQ, WQ, xs, ws, bias, fast, output);
  }
  static std::vector<Tensor> grouped(TensorList XQ, TensorList WQ, TensorList xs, TensorList ws) {
    return rowwise_grouped(*B, XQ, WQ, xs, ws, "f8f8bf16_rowwise_grouped");
  }
  static Tensor grouped_cat(TensorList XQ, TensorList WQ, TensorList xs, TensorList ws) {
    return rowwise_grouped_cat(*B, XQ, WQ, xs, ws);
  }
  static Tensor stacked(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws, const Tensor& ms) {
    return rowwise_grouped_stacked(*B, XQ, WQ, xs, ws, ms);
  }
  static Tensor dynamic(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws, const Tensor& zs,
                        bool zeroing) {
    return rowwise_grouped_dynamic(*B, XQ, WQ, xs, ws, zs, zeroing);
  }
  static Tensor grouped_mm_new(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                               const std::optional<Tensor>& offsets) {
    return rowwise_grouped_mm(*B, XQ, WQ, xs, ws, offsets, std::nullopt);
  }
  static void grouped_mm_into(const Tensor& XQ, const Tensor& WQ, const Tensor& xs, const Tensor& ws,
                              const std::optional<Tensor>& offsets, const Tensor& output) {
    rowwise_grouped_mm(*B, XQ, WQ, xs, ws, offsets, output);
  }
  static Tensor triton_row(const Tensor& a, const Tensor& b, const Tensor& as, const Tensor& bs,
                           const std::optional<Tensor>& bias, std::optional<at::ScalarType> dot_out_dtype,
                           bool allow_tf32, bool fast, bool imprecise, bool tma, std::optional<bool> no_persist,
                           bool ws) {
    return matmul_fp8_row(*B, a, b, as, bs, bias, dot_out_dtype, allow_tf32, fast, imprecise, tma, no_persist, ws);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("f8f8bf16_rowwise", &bf16);
    m.impl("f8f8f16_rowwise", &f16);
    m.impl("f8f8bf16_rowwise_preshuffle", &preshuffle_bf16);
    m.impl("f8f8f16_rowwise_preshuffle", &preshuffle_f16);
    m.impl("f8f8bf16_rowwise_out", &out);
    m.impl("_f8f8bf16_rowwise_batched_new", &batched_new);
    m.impl("_f8f8bf16_rowwise_batched_into", &batched_into);
    m.impl("f8f8bf16_rowwise_grouped", &grouped);
    m.impl("f8f8bf16_rowwise_grouped_cat", &grouped_cat);
    m.impl("f8f8bf16_rowwise_grouped_stacked", &stacked);
    m.impl("f8f8bf16_rowwise_grouped_dynamic", &dynamic);
    m.impl("_f8f8bf16_rowwise_grouped_mm_new", &grouped_mm_new);
    m.impl("_f8f8bf16_rowwise_grouped_mm_into", &grouped_mm_into);
  }
  static void register_triton(torch::Library& m) { m.impl("matmul_fp8_row", &triton_row); }
};

}  // namespace mslk::gemm
