// include/mslk/gemm/int4_gemm.h: typed dispatcher calls of the same-name ops.
#include <ATen/core/dispatch/Dispatcher.h>

#include "mslk/gemm/int4_gemm.h"

namespace mslk::gemm {
namespace {

using T = at::Tensor;
using Four = T(const T&, const T&, const T&, const T&);

T call4(const char* name, const T& a, const T& b, const T& c, const T& d) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Four>().call(a, b, c, d);
}

}  // namespace

at::Tensor bf16i4bf16_rowwise(at::Tensor X, at::Tensor W, at::Tensor w_scale_group, at::Tensor w_zero_group) {
  return call4("mslk::bf16i4bf16_rowwise", X, W, w_scale_group, w_zero_group);
}

at::Tensor bf16i4bf16_rowwise_batched(at::Tensor X, at::Tensor WQ, at::Tensor w_scale, at::Tensor w_zp) {
  return call4("mslk::bf16i4bf16_rowwise_batched", X, WQ, w_scale, w_zp);
}

at::Tensor f8i4bf16_rowwise(at::Tensor XQ, at::Tensor WQ, at::Tensor x_scale, at::Tensor w_scale, at::Tensor w_zp) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mslk::f8i4bf16_rowwise", "")
                       .typed<T(const T&, const T&, const T&, const T&, const T&)>();
  return op.call(XQ, WQ, x_scale, w_scale, w_zp);
}

}  // namespace mslk::gemm
