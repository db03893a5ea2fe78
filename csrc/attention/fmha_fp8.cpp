// mslk::fmha_fp8_dequant: FP8 attention operands (q, k or v [B, M, H, K] in E4M3 / E5M2) times their
// per-head descale, in the dtype the attention kernel reads. The FP8 attention forward
// (flash3.FwOp on ScaledTensor inputs, torch.ops.mslk_flash3.flash_fwd's descale_q/k/v) runs the
// bf16 / fp16 kernel on these values: out = attention(dtype(float(q) * dq), dtype(float(k) * dk),
// dtype(float(v) * dv)). ATen ops only, one function registered for CPU and CUDA (the fake is in
// mslk/attention/_fake.py).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "common/checks.h"

namespace mslk::attention {
namespace {

constexpr const char* kOp = "mslk.fmha_fp8_dequant";

// descale as [B or num_seqs, H] float32 (a scalar, [1], [n], [n, 1], [1, H], [n, H], or [n, Hd] with
// Hd dividing H: head h reads column h / (H / Hd), FlashAttention 3's per-K/V-head layout for q).
at::Tensor heads_descale(const at::Tensor& d, int64_t n, int64_t H) {
  check_dtype(d, kOp, "descale", {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16});
  at::Tensor s = d.to(at::kFloat);
  if (s.dim() == 0 || (s.dim() == 1 && s.numel() == 1)) return s.reshape({1, 1}).expand({n, H});
  TORCH_CHECK_VALUE(s.dim() <= 2, kOp, ": argument 'descale' must be a scalar, [n] or [n, heads], got shape ",
                    d.sizes());
  if (s.dim() == 1) s = s.unsqueeze(1);
  const int64_t rows = s.size(0), cols = s.size(1);
  TORCH_CHECK_VALUE((rows == n || rows == 1) && cols >= 1 && H % cols == 0, kOp, ": argument 'descale' of shape ",
                    d.sizes(), " does not fit ", n, " batches (or sequences) of ", H,
                    " heads (expected [", n, ", ", H, "], a head count dividing ", H, ", or 1s)");
  if (cols != H && cols != 1) s = s.repeat_interleave(H / cols, 1);
  return s.expand({n, H});
}

at::Tensor fmha_fp8_dequant(const at::Tensor& x, const at::Tensor& descale, at::ScalarType dtype,
                            const std::optional<at::Tensor>& seqstart) {
  check_dim(x, kOp, "x", 4, 4);
  check_dtype(x, kOp, "x", {at::kFloat8_e4m3fn, at::kFloat8_e5m2});
  check_same_device(descale, x, kOp, "descale", "x");
  TORCH_CHECK_TYPE(dtype == at::kBFloat16 || dtype == at::kHalf || dtype == at::kFloat, kOp,
                   ": argument 'dtype' must be bfloat16, float16 or float32, got ", dtype);
  const int64_t B = x.size(0), M = x.size(1), H = x.size(2);
  at::Tensor per_row;  // [B, M, H, 1] float32
  if (seqstart.has_value() && seqstart->defined()) {
    const at::Tensor& ss = *seqstart;
    check_dtype(ss, kOp, "seqstart", {at::kInt, at::kLong});
    check_dim(ss, kOp, "seqstart", 1, 1);
    check_same_device(ss, x, kOp, "seqstart", "x");
    TORCH_CHECK_VALUE(B == 1 && ss.numel() >= 2, kOp, ": with 'seqstart' (packed sequences) x must have batch 1 "
                      "and seqstart at least 2 entries; got x ", x.sizes(), " and seqstart ", ss.sizes());
    const int64_t n = ss.numel() - 1;
    const at::Tensor s = heads_descale(descale, n, H);  // [n, H]
    // Row r belongs to sequence s with seqstart[s] <= r < seqstart[s + 1] (rows outside every
    // sequence take the nearest one's descale: attention never reads them).
    const at::Tensor rows = at::arange(M, ss.options().dtype(at::kLong));
    const at::Tensor seq = (at::searchsorted(ss.to(at::kLong), rows, /*out_int32=*/false, /*right=*/true) - 1)
                               .clamp(0, n - 1);
    per_row = s.index_select(0, seq).reshape({1, M, H, 1});
  } else {
    per_row = heads_descale(descale, B, H).reshape({B, 1, H, 1});
  }
  return (x.to(at::kFloat) * per_row).to(dtype);
}

}  // namespace
}  // namespace mslk::attention

TORCH_LIBRARY_FRAGMENT(mslk, m) {
  // x [B, M, H, K] FP8 (E4M3 or E5M2); descale float, per (batch, head) as heads_descale takes it,
  // or per (sequence, head) of packed sequences (seqstart, int32 / int64, B == 1). Returns
  // dtype(float(x) * descale) [B, M, H, K].
  m.def("fmha_fp8_dequant(Tensor x, Tensor descale, ScalarType dtype, Tensor? seqstart=None) -> Tensor");
}
TORCH_LIBRARY_IMPL(mslk, CPU, m) { m.impl("fmha_fp8_dequant", &mslk::attention::fmha_fp8_dequant); }
TORCH_LIBRARY_IMPL(mslk, CUDA, m) { m.impl("fmha_fp8_dequant", &mslk::attention::fmha_fp8_dequant); }
