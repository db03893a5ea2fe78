// Reference attention forward: softmax(scale * q k^T + bias) v computed unfused with ATen ops in
// float32 (float64 for float64 inputs). Exact up to the accumulation dtype; the test oracle of the
// fused kernels. Registered for the CPU key here (the CUDA glue registers the same function).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>

#include "attention/fmha_reference.h"

namespace mslk::attention {

std::tuple<at::Tensor, at::Tensor> fmha_reference_fwd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    double scale, std::optional<at::ScalarType> output_dtype) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "fmha_reference_fwd: q, k, v must be 4-D [B, M, H, K]; got q.dim()=", q.dim(), ", k.dim()=", k.dim(),
              ", v.dim()=", v.dim());
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "fmha_reference_fwd: q, k, v must share a dtype; got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
              v.scalar_type());
  TORCH_CHECK(at::isFloatingType(q.scalar_type()) && q.element_size() >= 2,
              "fmha_reference_fwd: q must be float16, bfloat16, float32 or float64; got ", q.scalar_type());
  TORCH_CHECK(q.device() == k.device() && q.device() == v.device(), "fmha_reference_fwd: q, k, v on different devices");
  const int64_t B = q.size(0), H = q.size(2), K = q.size(3);
  const int64_t Mkv = k.size(1), Kv = v.size(3);
  TORCH_CHECK(k.size(0) == B && v.size(0) == B, "fmha_reference_fwd: batch sizes differ: q ", B, ", k ", k.size(0),
              ", v ", v.size(0));
  TORCH_CHECK(k.size(2) == H && v.size(2) == H, "fmha_reference_fwd: head counts differ: q ", H, ", k ", k.size(2),
              ", v ", v.size(2), " (expand K/V heads explicitly for GQA/MQA)");
  TORCH_CHECK(v.size(1) == Mkv, "fmha_reference_fwd: k has ", Mkv, " keys but v has ", v.size(1));
  TORCH_CHECK(k.size(3) == K, "fmha_reference_fwd: q head dim ", K, " != k head dim ", k.size(3));
  TORCH_CHECK(q.stride(3) == 1 || K <= 1, "fmha_reference_fwd: q must have stride 1 in its last dimension");
  TORCH_CHECK(k.stride(3) == 1 || K <= 1, "fmha_reference_fwd: k must have stride 1 in its last dimension");
  TORCH_CHECK(v.stride(3) == 1 || Kv <= 1, "fmha_reference_fwd: v must have stride 1 in its last dimension");

  const bool dbl = q.scalar_type() == at::kDouble;
  const auto acc = dbl ? at::kDouble : at::kFloat;
  const auto out_dtype = output_dtype.value_or(q.scalar_type());

  auto qf = q.to(acc).permute({0, 2, 1, 3});  // [B, H, Mq, K]
  auto kf = k.to(acc).permute({0, 2, 3, 1});  // [B, H, K, Mkv]
  auto vf = v.to(acc).permute({0, 2, 1, 3});  // [B, H, Mkv, Kv]
  auto s = at::matmul(qf, kf).mul_(scale);    // [B, H, Mq, Mkv]
  if (bias.has_value() && bias->defined()) {
    const auto& b = *bias;
    TORCH_CHECK(b.device() == q.device(), "fmha_reference_fwd: bias is on ", b.device(), ", q on ", q.device());
    TORCH_CHECK_TYPE(at::isFloatingType(b.scalar_type()), "fmha_reference_fwd: argument 'bias' must have a floating "
                     "dtype (an additive bias, -inf for masked), got ", b.scalar_type());
    TORCH_CHECK(b.dim() <= 4, "fmha_reference_fwd: bias must broadcast to [B, H, Mq, Mkv]; got ", b.sizes());
    for (int64_t i = 0; i < b.dim(); ++i) {
      const int64_t want = s.size(4 - b.dim() + i), got = b.size(i);
      TORCH_CHECK(got == want || got == 1, "fmha_reference_fwd: bias of shape ", b.sizes(),
                  " does not broadcast to [B, H, Mq, Mkv] = ", s.sizes());
    }
    s.add_(b.to(acc));
  }
  auto lse = at::logsumexp(s, -1);  // [B, H, Mq]; -inf where every key is masked (or Mkv == 0)
  auto safe = at::where(at::isinf(lse) & (lse < 0), at::zeros({}, lse.options()), lse);
  auto p = at::exp(s - safe.unsqueeze(-1));  // rows fully masked: exp(-inf) = 0, so out = 0
  auto out = at::matmul(p, vf).permute({0, 2, 1, 3}).to(out_dtype).contiguous();  // [B, Mq, H, Kv]
  return {out, lse.to(dbl ? at::kDouble : at::kFloat).contiguous()};
}

}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CPU, m) { m.impl("fmha_reference_fwd", &mslk::attention::fmha_reference_fwd); }
