// include/mslk/gemm/fp8_gemm.h: the native entry points, each a typed dispatcher call of the
// same-name op (so the backend follows the inputs' device, exactly as from Python).
#include "mslk/gemm/fp8_gemm.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <unordered_map>

namespace mslk::gemm {
namespace {

template <typename Sig>
const c10::TypedOperatorHandle<Sig>& op(const char* name) {
  // One handle per (name, signature); the name is a literal per call site.
  static thread_local std::unordered_map<const char*, c10::TypedOperatorHandle<Sig>> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Sig>()).first;
  return it->second;
}

using T = at::Tensor;
using OT = std::optional<at::Tensor>;

}  // namespace

T f8f8bf16_rowwise(T XQ, T WQ, T x_scale, T w_scale, OT bias, bool use_fast_accum) {
  return op<T(const T&, const T&, const T&, const T&, const OT&, bool)>("mslk::f8f8bf16_rowwise")
      .call(XQ, WQ, x_scale, w_scale, bias, use_fast_accum);
}

void f8f8bf16_rowwise_out(T XQ, T WQ, T x_scale, T w_scale, T output, OT bias, bool use_fast_accum) {
  op<void(const T&, const T&, const T&, const T&, const T&, const OT&, bool)>("mslk::f8f8bf16_rowwise_out")
      .call(XQ, WQ, x_scale, w_scale, output, bias, use_fast_accum);
}

T f8f8f16_rowwise(T XQ, T WQ, T x_scale, T w_scale, OT bias, bool use_fast_accum) {
  return op<T(const T&, const T&, const T&, const T&, const OT&, bool)>("mslk::f8f8f16_rowwise")
      .call(XQ, WQ, x_scale, w_scale, bias, use_fast_accum);
}

T f8f8bf16_rowwise_preshuffle(T XQ, T WQ, T x_scale, T w_scale, OT bias, bool use_fast_accum) {
  return op<T(const T&, const T&, const T&, const T&, const OT&, bool)>("mslk::f8f8bf16_rowwise_preshuffle")
      .call(XQ, WQ, x_scale, w_scale, bias, use_fast_accum);
}

T f8f8f16_rowwise_preshuffle(T XQ, T WQ, T x_scale, T w_scale, OT bias, bool use_fast_accum) {
  return op<T(const T&, const T&, const T&, const T&, const OT&, bool)>("mslk::f8f8f16_rowwise_preshuffle")
      .call(XQ, WQ, x_scale, w_scale, bias, use_fast_accum);
}

T f8f8bf16_rowwise_batched(T XQ, T WQ, T x_scale, T w_scale, OT bias, bool use_fast_accum, OT output) {
  return op<T(const T&, const T&, const T&, const T&, const OT&, bool, const OT&)>("mslk::f8f8bf16_rowwise_batched")
      .call(XQ, WQ, x_scale, w_scale, bias, use_fast_accum, output);
}

std::vector<T> f8f8bf16_rowwise_grouped(at::TensorList XQ, at::TensorList WQ, at::TensorList x_scale,
                                        at::TensorList w_scale) {
  return op<std::vector<T>(at::TensorList, at::TensorList, at::TensorList, at::TensorList)>(
             "mslk::f8f8bf16_rowwise_grouped")
      .call(XQ, WQ, x_scale, w_scale);
}

T f8f8bf16_rowwise_grouped_cat(at::TensorList XQ, at::TensorList WQ, at::TensorList x_scale, at::TensorList w_scale) {
  return op<T(at::TensorList, at::TensorList, at::TensorList, at::TensorList)>("mslk::f8f8bf16_rowwise_grouped_cat")
      .call(XQ, WQ, x_scale, w_scale);
}

T f8f8bf16_rowwise_grouped_stacked(T XQ, T WQ, T x_scale, T w_scale, T M_sizes) {
  return op<T(const T&, const T&, const T&, const T&, const T&)>("mslk::f8f8bf16_rowwise_grouped_stacked")
      .call(XQ, WQ, x_scale, w_scale, M_sizes);
}

T f8f8bf16_rowwise_grouped_dynamic(T XQ, T WQ, T x_scale, T w_scale, T zero_start_index_M,
                                   bool zeroing_output_tensor) {
  return op<T(const T&, const T&, const T&, const T&, const T&, bool)>("mslk::f8f8bf16_rowwise_grouped_dynamic")
      .call(XQ, WQ, x_scale, w_scale, zero_start_index_M, zeroing_output_tensor);
}

T f8f8bf16_rowwise_grouped_mm(T XQ, T WQ, T x_scale, T w_scale, OT offsets, T& output) {
  return op<T(const T&, const T&, const T&, const T&, const OT&, const OT&)>("mslk::f8f8bf16_rowwise_grouped_mm")
      .call(XQ, WQ, x_scale, w_scale, offsets, OT(output));
}

T f8f8bf16_blockwise(T XQ, T WQ, T x_scale, T w_scale, int64_t block_m, int64_t block_n, int64_t block_k) {
  return op<T(const T&, const T&, const T&, const T&, int64_t, int64_t, int64_t)>("mslk::f8f8bf16_blockwise")
      .call(XQ, WQ, x_scale, w_scale, block_m, block_n, block_k);
}

T f8f8bf16_groupwise(T XQ, T WQ, T x_scale, T w_scale) {
  return op<T(const T&, const T&, const T&, const T&)>("mslk::f8f8bf16_groupwise").call(XQ, WQ, x_scale, w_scale);
}

T f8f8bf16_groupwise_grouped(T XQ, T WQ, T x_scale, T w_scale, T M_sizes) {
  return op<T(const T&, const T&, const T&, const T&, const T&)>("mslk::f8f8bf16_groupwise_grouped")
      .call(XQ, WQ, x_scale, w_scale, M_sizes);
}

}  // namespace mslk::gemm
