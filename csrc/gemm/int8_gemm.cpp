// Argument checks and shape logic of the INT8 GEMM ops (int8_gemm.h). Any K: the CUDA backend
// zero-pads K to the kernel's 16-byte rows itself.
#include "gemm/int8_gemm.h"

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>

#include "common/checks.h"

namespace mslk::gemm {
namespace {

void check_operands(const Tensor& XQ, const Tensor& WQ, int64_t split_k, const char* op) {
  check_dtype(XQ, op, "XQ", {at::kChar});
  check_dtype(WQ, op, "WQ", {at::kChar});
  check_dim(XQ, op, "XQ", 2, 2);
  check_dim(WQ, op, "WQ", 2, 2);
  check_last_dim_contiguous(XQ, op, "XQ");
  check_last_dim_contiguous(WQ, op, "WQ");
  check_same_device(WQ, XQ, op, "WQ", "XQ");
  TORCH_CHECK_VALUE(XQ.size(1) == WQ.size(1), op, ": 'XQ' [M, K] and 'WQ' [N, K] must have the same K, got shapes ",
                    XQ.sizes(), " and ", WQ.sizes());
  check_positive(split_k, op, "split_k");
}

Tensor run(const Int8Backend& be, const Tensor& XQ, const Tensor& WQ, float scale, const Tensor& scale_t,
           const char* op) {
  c10::OptionalDeviceGuard guard(XQ.device());
  Tensor out = at::empty({XQ.size(0), WQ.size(0)}, XQ.options().dtype(at::kBFloat16));
  if (out.numel() == 0) return out;
  if (XQ.size(1) == 0) return out.zero_();
  be.run(Int8Call{XQ, WQ, out, scale, scale_t, op});
  return out;
}

}  // namespace

Tensor i8i8bf16(const Int8Backend& be, const Tensor& XQ, const Tensor& WQ, double scale, int64_t split_k) {
  constexpr const char* op = "i8i8bf16";
  check_operands(XQ, WQ, split_k, op);
  TORCH_CHECK_VALUE(std::isfinite(scale), op, ": argument 'scale' must be finite, got ", scale);
  return run(be, XQ, WQ, static_cast<float>(scale), Tensor(), op);
}

Tensor i8i8bf16_dynamic(const Int8Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& scale,
                        int64_t split_k) {
  constexpr const char* op = "i8i8bf16_dynamic";
  check_operands(XQ, WQ, split_k, op);
  check_dtype(scale, op, "scale", {at::kFloat});
  check_same_device(scale, XQ, op, "scale", "XQ");
  TORCH_CHECK_VALUE(scale.numel() == 1 && scale.dim() <= 1, op,
                    ": argument 'scale' must hold one float32 value (shape [] or [1]), got shape ", scale.sizes());
  return run(be, XQ, WQ, 0.f, scale, op);
}

}  // namespace mslk::gemm
