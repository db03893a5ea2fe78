// mslk::fmha_fused_bwd: argument checks shared by every backend, and the CPU implementation (the
// exact reference backward of fmha_reference_bwd.h over the dense mask of the descriptor).
#include "attention/fmha_bwd.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include "attention/fmha_dropout.h"
#include "attention/fmha_fwd.h"
#include "attention/fmha_mask.h"
#include "attention/fmha_reference_bwd.h"
#include "common/checks.h"

namespace mslk::attention {
namespace {
constexpr const char* kOp = "mslk::fmha_fused_bwd";

// `t` must be shaped like `shape`, on q's device, with stride 1 in its last dimension.
void check_like(const at::Tensor& t, const char* name, at::IntArrayRef shape, const at::Tensor& q) {
  TORCH_CHECK_VALUE(t.sizes() == shape, kOp, ": argument '", name, "' must have shape ", shape, ", got ", t.sizes());
  check_same_device(t, q, kOp, name, "q");
  check_last_dim_contiguous(t, kOp, name);
}
}  // namespace

FmhaDropout fmha_bwd_check(const FmhaBwdArgs& a) {
  const auto& q = a.q;
  const FmhaDropout d =
      fmha_fwd_check({q, a.k, a.v, a.bias, a.seqstart_q, a.seqstart_k, a.seqlen_k, a.max_seqlen_q, a.mask_kind,
                      a.window_left, a.window_right, a.scale, std::nullopt, 0, a.dropout_p, a.rng_state, kOp});
  check_dtype(q, kOp, "q", {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble});
  const int64_t B = q.size(0), Mq = q.size(1), H = q.size(2), Kv = a.v.size(3);
  check_dim(a.grad_out, kOp, "grad_out", 4, 4);
  check_dim(a.out, kOp, "out", 4, 4);
  check_dim(a.lse, kOp, "lse", 3, 3);
  check_like(a.grad_out, "grad_out", {B, Mq, H, Kv}, q);
  check_like(a.out, "out", {B, Mq, H, Kv}, q);
  TORCH_CHECK_TYPE(a.grad_out.scalar_type() == q.scalar_type() && a.out.scalar_type() == q.scalar_type(), kOp,
                   ": grad_out and out must have q's dtype ", q.scalar_type(), "; got ", a.grad_out.scalar_type(),
                   " and ", a.out.scalar_type());
  TORCH_CHECK_VALUE(a.lse.sizes() == at::IntArrayRef({B, H, Mq}), kOp,
                    ": argument 'lse' must have shape [B, H, Mq] = [", B, ", ", H, ", ", Mq, "], got ", a.lse.sizes());
  check_same_device(a.lse, q, kOp, "lse", "q");
  if (q.scalar_type() == at::kDouble)
    check_dtype(a.lse, kOp, "lse", {at::kDouble, at::kFloat});
  else
    check_dtype(a.lse, kOp, "lse", {at::kFloat});
  TORCH_CHECK_VALUE(a.max_seqlen_k >= -1, kOp, ": max_seqlen_k must be -1 (Mkv) or a bound >= 0, got ", a.max_seqlen_k);
  TORCH_CHECK_VALUE(!a.bias_requires_grad || (a.bias.has_value() && a.bias->defined()), kOp,
                    ": bias_requires_grad=True needs a tensor bias");
  return d;
}

namespace {
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fmha_bwd_cpu(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& seqstart_q,
    const std::optional<at::Tensor>& seqstart_k, const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, int64_t mask_kind, int64_t window_left, int64_t window_right, double scale,
    double dropout_p, const std::optional<at::Tensor>& rng_state, bool bias_requires_grad, bool /*deterministic*/) {
  const FmhaDropout drop =
      fmha_bwd_check({grad_out, q, k, v, out, lse, bias, seqstart_q, seqstart_k, seqlen_k, max_seqlen_q, max_seqlen_k,
                      mask_kind, window_left, window_right, scale, dropout_p, rng_state, bias_requires_grad});
  const int64_t B = q.size(0), Mq = q.size(1), H = q.size(2), Mkv = k.size(1);
  const FmhaMask mask =
      fmha_mask_make(B, Mq, Mkv, seqstart_q, seqstart_k, seqlen_k, mask_kind, window_left, window_right, kOp);
  const FmhaKeepFn keep = [&](int64_t h0, int64_t nh, int64_t r0, int64_t nr) {
    return fmha_dropout_keep(drop, B, H, h0, nh, r0, nr, Mkv, q.device());
  };
  return fmha_reference_bwd({q, k, v, bias, mask, scale, drop.p > 0.f ? dropout_p : 0.0, &keep}, grad_out, lse,
                            bias_requires_grad);
}
}  // namespace

}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CPU, m) { m.impl("fmha_fused_bwd", &mslk::attention::fmha_bwd_cpu); }
