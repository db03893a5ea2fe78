// include/mslk/gemm/int_gemm.h: the INT8 entry points, typed dispatcher calls of the same-name
// ops (bf16x9_gemm's is in bf16x9.cpp, next to its router).
#include <ATen/core/dispatch/Dispatcher.h>

#include "mslk/gemm/int_gemm.h"

namespace mslk::gemm {

at::Tensor i8i8bf16(at::Tensor XQ, at::Tensor WQ, double scale, int64_t split_k) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mslk::i8i8bf16", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double, int64_t)>();
  return op.call(XQ, WQ, scale, split_k);
}

at::Tensor i8i8bf16_dynamic(at::Tensor XQ, at::Tensor WQ, at::Tensor scale, int64_t split_k) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mslk::i8i8bf16_dynamic", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t)>();
  return op.call(XQ, WQ, scale, split_k);
}

}  // namespace mslk::gemm
