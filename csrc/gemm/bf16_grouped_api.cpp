// include/mslk/gemm/bf16_grouped.h: typed dispatcher calls of the same-name ops.
#include "mslk/gemm/bf16_grouped.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace mslk::gemm {
namespace {

template <typename Sig>
c10::TypedOperatorHandle<Sig> op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Sig>();
}

using T = at::Tensor;
using OT = std::optional<at::Tensor>;
using OI = std::optional<int64_t>;

}  // namespace

std::vector<T> bf16bf16bf16_grouped(at::TensorList X, at::TensorList W) {
  static const auto h = op<std::vector<T>(at::TensorList, at::TensorList)>("mslk::bf16bf16bf16_grouped");
  return h.call(X, W);
}

T bf16bf16bf16_grouped_cat(at::TensorList X, at::TensorList W) {
  static const auto h = op<T(at::TensorList, at::TensorList)>("mslk::bf16bf16bf16_grouped_cat");
  return h.call(X, W);
}

T bf16bf16bf16_grouped_dynamic(T X, T W, T zero_start_index_M) {
  static const auto h = op<T(const T&, const T&, const T&)>("mslk::bf16bf16bf16_grouped_dynamic");
  return h.call(X, W, zero_start_index_M);
}

T bf16bf16bf16_grouped_stacked(T X, T W, T M_sizes, OT out, OI num_sms) {
  static const auto h = op<T(const T&, const T&, const T&, const OT&, OI)>("mslk::bf16bf16bf16_grouped_stacked");
  return h.call(X, W, M_sizes, out, num_sms);
}

T bf16bf16bf16_grouped_grad(T X, T W, T M_sizes, OT out, OI num_sms) {
  static const auto h = op<T(const T&, const T&, const T&, const OT&, OI)>("mslk::bf16bf16bf16_grouped_grad");
  return h.call(X, W, M_sizes, out, num_sms);
}

T bf16bf16bf16_grouped_wgrad(T X, T W, T M_sizes, OT output, bool output_accum, OI num_sms) {
  static const auto h =
      op<T(const T&, const T&, const T&, const OT&, bool, OI)>("mslk::bf16bf16bf16_grouped_wgrad");
  return h.call(X, W, M_sizes, output, output_accum, num_sms);
}

}  // namespace mslk::gemm
