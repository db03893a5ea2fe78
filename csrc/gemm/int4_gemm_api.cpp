// include/mslk/gemm/int4_gemm.h: typed dispatcher calls of the same-name ops.
#include <ATen/core/dispatch/Dispatcher.h>

#include "mslk/gemm/int4_gemm.h"

namespace mslk::gemm {
namespace {

using T = at::Tensor;
template <class Sig>
c10::TypedOperatorHandle<Sig> handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

T call4(const char* name, const T& a, const T& b, const T& c, const T& d) {
  return handle<T(const T&, const T&, const T&, const T&)>(name).call(a, b, c, d);
}

T call5(const char* name, const T& a, const T& b, const T& c, const T& d, const T& e) {
  return handle<T(const T&, const T&, const T&, const T&, const T&)>(name).call(a, b, c, d, e);
}

}  // namespace

at::Tensor bf16i4bf16_rowwise(at::Tensor X, at::Tensor W, at::Tensor w_scale_group, at::Tensor w_zero_group) {
  return call4("mslk::bf16i4bf16_rowwise", X, W, w_scale_group, w_zero_group);
}

at::Tensor bf16i4bf16_rowwise_batched(at::Tensor X, at::Tensor WQ, at::Tensor w_scale, at::Tensor w_zp) {
  return call4("mslk::bf16i4bf16_rowwise_batched", X, WQ, w_scale, w_zp);
}

at::Tensor f8i4bf16_rowwise(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale, at::Tensor w_zp) {
  return call5("mslk::f8i4bf16_rowwise", XQ, WQ, x_scale, w_scale, w_zp);
}

std::tuple<at::Tensor, at::Tensor> preshuffle_i4(at::Tensor WQ, at::Tensor w_scale) {
  return handle<std::tuple<T, T>(const T&, const T&)>("mslk::preshuffle_i4").call(WQ, w_scale);
}

at::Tensor bf16i4bf16_shuffled(at::Tensor X, at::Tensor W, at::Tensor w_scale_group, at::Tensor w_zero_group) {
  return call4("mslk::bf16i4bf16_shuffled", X, W, w_scale_group, w_zero_group);
}

at::Tensor bf16i4bf16_shuffled_batched(at::Tensor X, at::Tensor WQ, at::Tensor w_scale, at::Tensor w_zp) {
  return call4("mslk::bf16i4bf16_shuffled_batched", X, WQ, w_scale, w_zp);
}

at::Tensor f8i4bf16_shuffled(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                             at::Tensor w_scale_group) {
  return call5("mslk::f8i4bf16_shuffled", XQ, WQ, x_scale, w_scale, w_scale_group);
}

at::Tensor bf16i4bf16_shuffled_grouped(at::Tensor X, at::Tensor WQ, at::Tensor w_scale_group,
                                       at::Tensor w_zero_group, at::Tensor M_sizes) {
  return call5("mslk::bf16i4bf16_shuffled_grouped", X, WQ, w_scale_group, w_zero_group, M_sizes);
}

at::Tensor f8i4bf16_shuffled_grouped(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale,
                                     at::Tensor w_scale_group, at::Tensor M_sizes) {
  return handle<T(const T&, const T&, const T&, const T&, const T&, const T&)>("mslk::f8i4bf16_shuffled_grouped")
      .call(XQ, WQ, x_scale, w_scale, w_scale_group, M_sizes);
}

}  // namespace mslk::gemm
