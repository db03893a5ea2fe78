// Argument checks and shape logic of the INT4-weight GEMM ops (int4_gemm.h). The group size K / G
// must be a multiple of 32 on every device (the CUDA kernels read 16 bytes = 32 weights of one
// group at a time), so a call that works on the CPU works on the GPU.
#include "gemm/int4_gemm.h"

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "common/checks.h"

namespace mslk::gemm {
namespace int4 {

void check_operands(const Tensor& X, const Tensor& W, const Tensor& s, const Tensor& z, int64_t dims, const Names& n) {
  const char* op = n.op;
  check_dtype(W, op, n.w, {at::kChar});
  check_dim(X, op, n.x, dims, dims);
  check_dim(W, op, n.w, dims, dims);
  check_dim(s, op, n.s, dims, dims);
  check_dim(z, op, n.z, dims, dims);
  if (n.fp8_scale) {
    check_dtype(s, op, n.s, {at::kFloat8_e4m3fn});
  } else {
    check_dtype(s, op, n.s, {at::kBFloat16, at::kFloat});
    TORCH_CHECK_TYPE(z.scalar_type() == s.scalar_type(), op, ": argument '", n.z, "' must have the dtype of '", n.s,
                     "' (", s.scalar_type(), "), got ", z.scalar_type());
  }
  check_last_dim_contiguous(X, op, n.x);
  check_last_dim_contiguous(W, op, n.w);
  check_same_device(W, X, op, n.w, n.x);
  check_same_device(s, X, op, n.s, n.x);
  check_same_device(z, X, op, n.z, n.x);
  const int64_t K = X.size(-1), N = W.size(-2), G = s.size(-2);
  if (dims == 3) {
    const int64_t B = X.size(0);
    TORCH_CHECK_VALUE(W.size(0) == B && s.size(0) == B && z.size(0) == B, op, ": '", n.x, "', '", n.w, "', '", n.s,
                      "' and '", n.z, "' must have the same batch size, got shapes ", X.sizes(), ", ", W.sizes(), ", ",
                      s.sizes(), " and ", z.sizes());
  }
  TORCH_CHECK_VALUE(W.size(-1) * 2 == K, op, ": '", n.w, "' [N, K/2] (two int4 values a byte) must have K/2 = ",
                    K / 2, " columns for '", n.x, "' [M, K] with K=", K, ", got shape ", W.sizes());
  TORCH_CHECK_VALUE(s.size(-1) == N && G > 0, op, ": argument '", n.s, "' must be [K/group, N] with N=", N,
                    ", got shape ", s.sizes());
  TORCH_CHECK_VALUE(z.sizes() == s.sizes(), op, ": argument '", n.z, "' must have the shape of '", n.s, "' ",
                    s.sizes(), ", got ", z.sizes());
  TORCH_CHECK_VALUE(K % G == 0 && (K / G) % 32 == 0, op, ": argument '", n.s, "' has ", G,
                    " groups along K; the group size K / groups must be a whole multiple of 32, got K=", K);
}

void run_into(const Int4Backend& be, const Tensor& x3, const Tensor& w3, const Tensor& s3, const Tensor& z3,
              const Tensor& x_scale, const Tensor& out3, const char* op, const Tensor& row_scale) {
  if (out3.numel() == 0) return;
  if (x3.size(2) == 0) {
    out3.zero_();
    return;
  }
  c10::OptionalDeviceGuard guard(x3.device());
  const int64_t B = x3.size(0);
  be.run(Int4Call{x3, w3, s3.contiguous(), z3.defined() ? z3.contiguous() : Tensor(),
                  x_scale.defined() ? x_scale.reshape({B, x3.size(1)}).contiguous() : Tensor(), out3, op,
                  row_scale.defined() ? row_scale.reshape({B, w3.size(1)}).contiguous() : Tensor()});
}

}  // namespace int4

namespace {

using int4::Names;

// Batch-major 3-D views; the scales and x_scale made contiguous (small), X / W as given.
Tensor run(const Int4Backend& be, const Tensor& X, const Tensor& W, const Tensor& s, const Tensor& z,
           const Tensor& x_scale, bool batched, const char* op) {
  const Tensor x3 = batched ? X : X.unsqueeze(0), w3 = batched ? W : W.unsqueeze(0);
  const Tensor s3 = batched ? s : s.unsqueeze(0), z3 = batched ? z : z.unsqueeze(0);
  Tensor out = at::empty({x3.size(0), x3.size(1), w3.size(1)}, X.options().dtype(at::kBFloat16));
  int4::run_into(be, x3, w3, s3, z3, x_scale, out, op);
  return batched ? out : out.squeeze(0);
}

}  // namespace

Tensor bf16i4bf16_rowwise(const Int4Backend& be, const Tensor& X, const Tensor& W, const Tensor& w_scale_group,
                          const Tensor& w_zero_group, const char* op) {
  check_dtype(X, op, "X", {at::kBFloat16});
  int4::check_operands(X, W, w_scale_group, w_zero_group, 2, Names{op, "X", "W", "w_scale_group", "w_zero_group"});
  return run(be, X, W, w_scale_group, w_zero_group, Tensor(), false, op);
}

Tensor bf16i4bf16_rowwise_batched(const Int4Backend& be, const Tensor& X, const Tensor& WQ, const Tensor& w_scale,
                                  const Tensor& w_zp, const char* op) {
  check_dtype(X, op, "X", {at::kBFloat16});
  int4::check_operands(X, WQ, w_scale, w_zp, 3, Names{op, "X", "WQ", "w_scale", "w_zp"});
  return run(be, X, WQ, w_scale, w_zp, Tensor(), true, op);
}

Tensor f8i4bf16_rowwise(const Int4Backend& be, const Tensor& XQ, const Tensor& WQ, const Tensor& x_scale,
                        const Tensor& w_scale, const Tensor& w_zp) {
  constexpr const char* op = "f8i4bf16_rowwise";
  check_dtype(XQ, op, "XQ", {at::kFloat8_e4m3fn});
  int4::check_operands(XQ, WQ, w_scale, w_zp, 2, Names{op, "XQ", "WQ", "w_scale", "w_zp"});
  check_dtype(x_scale, op, "x_scale", {at::kFloat});
  check_same_device(x_scale, XQ, op, "x_scale", "XQ");
  TORCH_CHECK_VALUE(x_scale.numel() == XQ.size(0) && (x_scale.dim() == 1 || (x_scale.dim() == 2 && x_scale.size(1) == 1)),
                    op, ": argument 'x_scale' must be [M] or [M, 1] float32 with M=", XQ.size(0), ", got shape ",
                    x_scale.sizes());
  return run(be, XQ, WQ, w_scale, w_zp, x_scale, false, op);
}

}  // namespace mslk::gemm
