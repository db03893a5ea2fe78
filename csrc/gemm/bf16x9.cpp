// Argument checks of bf16x9_gemm (bf16x9.h), the router of the public op over its internal pair,
// and the native entry point of include/mslk/gemm/int_gemm.h.
#include "gemm/bf16x9.h"

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include <optional>

#include "common/checks.h"
#include "common/out_router.h"
#include "mslk/gemm/int_gemm.h"

namespace mslk::gemm {
namespace {

constexpr const char* kOp = "bf16x9_gemm";

void check_operands(const Tensor& A, const Tensor& B) {
  check_dtype(A, kOp, "A", {at::kFloat});
  check_dtype(B, kOp, "B", {at::kFloat});
  check_dim(A, kOp, "A", 2, 2);
  check_dim(B, kOp, "B", 2, 2);
  check_last_dim_contiguous(A, kOp, "A");
  check_last_dim_contiguous(B, kOp, "B");
  check_same_device(B, A, kOp, "B", "A");
  TORCH_CHECK_VALUE(A.size(1) == B.size(1), kOp, ": 'A' [M, K] and 'B' [N, K] must have the same K, got shapes ",
                    A.sizes(), " and ", B.sizes());
}

void run(const Bf16x9Backend& be, const Tensor& A, const Tensor& B, const Tensor& out) {
  if (out.numel() == 0) return;
  if (A.size(1) == 0) {  // empty sum
    out.zero_();
    return;
  }
  be.run(A, B, out);
}

}  // namespace

Tensor bf16x9_gemm_new(const Bf16x9Backend& be, const Tensor& A, const Tensor& B) {
  check_operands(A, B);
  c10::OptionalDeviceGuard guard(A.device());
  Tensor out = at::empty({A.size(0), B.size(0)}, A.options());
  run(be, A, B, out);
  return out;
}

void bf16x9_gemm_into(const Bf16x9Backend& be, const Tensor& A, const Tensor& B, const Tensor& output) {
  check_operands(A, B);
  check_dtype(output, kOp, "output", {at::kFloat});
  check_same_device(output, A, kOp, "output", "A");
  TORCH_CHECK_VALUE(output.dim() == 2 && output.size(0) == A.size(0) && output.size(1) == B.size(0), kOp,
                    ": argument 'output' must have shape [M, N] = [", A.size(0), ", ", B.size(0), "], got ",
                    output.sizes());
  check_last_dim_contiguous(output, kOp, "output");
  c10::OptionalDeviceGuard guard(A.device());
  run(be, A, B, output);
}

at::Tensor bf16x9_gemm(at::Tensor A, at::Tensor B, std::optional<at::Tensor> output) {
  if (output) {
    static auto into = internal_op<void(const Tensor&, const Tensor&, const Tensor&)>("mslk::_bf16x9_gemm_into");
    into.call(A, B, *output);
    return *output;
  }
  static auto fresh = internal_op<Tensor(const Tensor&, const Tensor&)>("mslk::_bf16x9_gemm_new");
  return fresh.call(A, B);
}

}  // namespace mslk::gemm

namespace {
at::Tensor bf16x9_router(const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& output) {
  return mslk::gemm::bf16x9_gemm(A, B, output);
}
}  // namespace

TORCH_LIBRARY_IMPL(mslk, CompositeImplicitAutograd, m) { m.impl("bf16x9_gemm", &bf16x9_router); }
