// BF16 grouped GEMM ops (torch.ops.mslk.bf16bf16bf16_grouped*), written once against a backend
// (CPU reference or CUDA) that runs the single contract of bf16_grouped_params.h, and the
// template that registers them.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "gemm/bf16_grouped_params.h"

namespace mslk::gemm {

struct Bf16GroupedBackend {
  void (*run)(const Bf16GroupedParams&);
  bool sizes_on_host;  // group sizes readable without a sync: validate their values
  // The list forms in one grouped launch (descriptor mode), or null. False: nothing was
  // launched, the glue runs one GEMM per group.
  bool (*list)(const Bf16GroupedParams&);
};

using at::Tensor;
using at::TensorList;

std::vector<Tensor> bf16_grouped(const Bf16GroupedBackend& b, TensorList X, TensorList W);
Tensor bf16_grouped_cat(const Bf16GroupedBackend& b, TensorList X, TensorList W);
Tensor bf16_grouped_dynamic(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& zs);
Tensor bf16_grouped_stacked(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& M_sizes,
                            const std::optional<Tensor>& out, std::optional<int64_t> num_sms);
Tensor bf16_grouped_grad(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& M_sizes,
                         const std::optional<Tensor>& out, std::optional<int64_t> num_sms);
Tensor bf16_grouped_wgrad(const Bf16GroupedBackend& b, const Tensor& X, const Tensor& W, const Tensor& M_sizes,
                          const std::optional<Tensor>& output, bool output_accum, std::optional<int64_t> num_sms);

template <const Bf16GroupedBackend* B>
struct Bf16GroupedOps {
  static std::vector<Tensor> grouped(TensorList X, TensorList W) { return bf16_grouped(*B, X, W); }
  static Tensor cat(TensorList X, TensorList W) { return bf16_grouped_cat(*B, X, W); }
  static Tensor dynamic(const Tensor& X, const Tensor& W, const Tensor& zs) {
    return bf16_grouped_dynamic(*B, X, W, zs);
  }
  // The ops with an optional output register as their internal pair (common/out_router.h).
  static Tensor stacked_new(const Tensor& X, const Tensor& W, const Tensor& ms, std::optional<int64_t> num_sms) {
    return bf16_grouped_stacked(*B, X, W, ms, std::nullopt, num_sms);
  }
  static void stacked_into(const Tensor& X, const Tensor& W, const Tensor& ms, const Tensor& out,
                           std::optional<int64_t> num_sms) {
    bf16_grouped_stacked(*B, X, W, ms, out, num_sms);
  }
  static Tensor grad_new(const Tensor& X, const Tensor& W, const Tensor& ms, std::optional<int64_t> num_sms) {
    return bf16_grouped_grad(*B, X, W, ms, std::nullopt, num_sms);
  }
  static void grad_into(const Tensor& X, const Tensor& W, const Tensor& ms, const Tensor& out,
                        std::optional<int64_t> num_sms) {
    bf16_grouped_grad(*B, X, W, ms, out, num_sms);
  }
  static Tensor wgrad_new(const Tensor& X, const Tensor& W, const Tensor& ms, bool accum,
                          std::optional<int64_t> num_sms) {
    return bf16_grouped_wgrad(*B, X, W, ms, std::nullopt, accum, num_sms);
  }
  static void wgrad_into(const Tensor& X, const Tensor& W, const Tensor& ms, const Tensor& output, bool accum,
                         std::optional<int64_t> num_sms) {
    bf16_grouped_wgrad(*B, X, W, ms, output, accum, num_sms);
  }
  static void register_mslk(torch::Library& m) {
    m.impl("bf16bf16bf16_grouped", &grouped);
    m.impl("bf16bf16bf16_grouped_cat", &cat);
    m.impl("bf16bf16bf16_grouped_dynamic", &dynamic);
    m.impl("_bf16bf16bf16_grouped_stacked_new", &stacked_new);
    m.impl("_bf16bf16bf16_grouped_stacked_into", &stacked_into);
    m.impl("_bf16bf16bf16_grouped_grad_new", &grad_new);
    m.impl("_bf16bf16bf16_grouped_grad_into", &grad_into);
    m.impl("_bf16bf16bf16_grouped_wgrad_new", &wgrad_new);
    m.impl("_bf16bf16bf16_grouped_wgrad_into", &wgrad_into);
  }
};

}  // namespace mslk::gemm
