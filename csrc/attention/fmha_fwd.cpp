// mslk::fmha_fused_fwd: argument checks shared by every backend, and the CPU implementation, which
// builds the dense additive mask of the descriptor (fmha_mask.h) and runs the exact reference
// forward (with dropout: fmha_reference_fwd_dropout).
#include "attention/fmha_fwd.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include "attention/fmha_dropout.h"
#include "attention/fmha_mask.h"
#include "attention/fmha_reference.h"
#include "attention/fmha_reference_bwd.h"
#include "common/checks.h"

namespace mslk::attention {
namespace {
constexpr const char* kOp = "mslk::fmha_fused_fwd";

void check_seq_tensor(const std::optional<at::Tensor>& t, const at::Tensor& q, const char* name, const char* op) {
  if (!t.has_value() || !t->defined()) return;
  check_dtype(*t, op, name, {at::kInt});
  check_dim(*t, op, name, 1, 1);
  check_same_device(*t, q, op, name, "q");
}

}  // namespace

FmhaDropout fmha_fwd_check(const FmhaFwdArgs& a) {
  const char* op = a.op;
  const auto &q = a.q, &k = a.k, &v = a.v;
  check_dim(q, op, "q", 4, 4);
  check_dim(k, op, "k", 4, 4);
  check_dim(v, op, "v", 4, 4);
  TORCH_CHECK_TYPE(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), op,
                   ": q, k, v must share a dtype; got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
                   v.scalar_type());
  check_same_device(k, q, op, "k", "q");
  check_same_device(v, q, op, "v", "q");
  const int64_t B = q.size(0), H = q.size(2), K = q.size(3), Mkv = k.size(1);
  TORCH_CHECK_VALUE(k.size(0) == B && v.size(0) == B, op, ": batch sizes differ: q ", B, ", k ", k.size(0),
                    ", v ", v.size(0));
  TORCH_CHECK_VALUE(k.size(2) == H && v.size(2) == H, op, ": head counts differ: q ", H, ", k ", k.size(2),
                    ", v ", v.size(2), " (expand K/V heads explicitly for GQA/MQA)");
  TORCH_CHECK_VALUE(v.size(1) == Mkv, op, ": k has ", Mkv, " keys but v has ", v.size(1));
  TORCH_CHECK_VALUE(k.size(3) == K, op, ": q head dim ", K, " != k head dim ", k.size(3));
  check_last_dim_contiguous(q, op, "q");
  check_last_dim_contiguous(k, op, "k");
  check_last_dim_contiguous(v, op, "v");
  TORCH_CHECK_VALUE(a.mask_kind >= 0 && a.mask_kind <= 3, op,
                    ": mask_kind must be 0 (none), 1 (causal top-left), 2 (causal bottom-right) or 3 (local "
                    "bottom-right); got ", a.mask_kind);
  if (given(a.bias)) {
    const auto& b = *a.bias;
    check_same_device(b, q, op, "bias", "q");
    check_dtype(b, op, "bias", {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble});  // additive, -inf masks
    TORCH_CHECK_VALUE(b.dim() <= 4, op, ": bias must broadcast to [B, H, Mq, Mkv]; got shape ", b.sizes());
    const int64_t full[4] = {B, H, q.size(1), Mkv};
    for (int64_t i = 0; i < b.dim(); ++i) {
      const int64_t want = full[4 - b.dim() + i], got = b.size(i);
      TORCH_CHECK_VALUE(got == want || got == 1, op, ": bias of shape ", b.sizes(),
                        " does not broadcast to [B, H, Mq, Mkv] = [", B, ", ", H, ", ", q.size(1), ", ", Mkv, "]");
    }
  }
  check_seq_tensor(a.seqstart_q, q, "seqstart_q", op);
  check_seq_tensor(a.seqstart_k, q, "seqstart_k", op);
  check_seq_tensor(a.seqlen_k, q, "seqlen_k", op);
  if (given(a.seqstart_q)) {
    TORCH_CHECK_VALUE(B == 1, op, ": variable-length inputs (seqstart_q given) are packed into batch 1; got B=", B);
    TORCH_CHECK_VALUE(given(a.seqstart_k), op, ": seqstart_q needs seqstart_k");
    const int64_t n = a.seqstart_q->numel() - 1;
    TORCH_CHECK_VALUE(n >= 1, op, ": seqstart_q must hold at least 2 entries; got ", a.seqstart_q->numel());
    if (given(a.seqlen_k)) {
      TORCH_CHECK_VALUE(a.seqlen_k->numel() == n && a.seqstart_k->numel() >= n, op, ": with ", n,
                        " sequences, seqlen_k needs ", n, " entries and seqstart_k at least ", n, "; got ",
                        a.seqlen_k->numel(), " and ", a.seqstart_k->numel());
    } else {
      TORCH_CHECK_VALUE(a.seqstart_k->numel() == n + 1, op, ": seqstart_k needs ", n + 1, " entries; got ",
                        a.seqstart_k->numel());
    }
    if (given(a.block_tables)) {
      const auto& bt = *a.block_tables;
      check_dtype(bt, op, "block_tables", {at::kInt});
      check_dim(bt, op, "block_tables", 2, 2);
      check_same_device(bt, q, op, "block_tables", "q");
      TORCH_CHECK_VALUE(bt.size(0) == n, op, ": block_tables needs one row per sequence (", n, "), got shape ",
                        bt.sizes());
      TORCH_CHECK_VALUE(a.page_size > 0 && a.page_size < (int64_t(1) << 31), op,
                        ": paged K/V needs 0 < page_size < 2^31, got ", a.page_size);
      TORCH_CHECK_VALUE(given(a.seqlen_k), op, ": paged K/V needs seqlen_k (the key count of each lane)");
      TORCH_CHECK_VALUE(!given(a.bias), op, ": a tensor bias cannot be combined with paged K/V");
      TORCH_CHECK_VALUE(bt.size(1) * a.page_size < (int64_t(1) << 31), op,
                        ": block_tables.shape[1] * page_size must be < 2^31");
    }
  } else {
    TORCH_CHECK_VALUE(!given(a.block_tables), op, ": block_tables (paged K/V) needs seqstart_q (varlen)");
    TORCH_CHECK_VALUE(!given(a.seqstart_k), op, ": seqstart_k given without seqstart_q");
    if (given(a.seqlen_k))
      TORCH_CHECK_VALUE(a.seqlen_k->numel() == B, op, ": seqlen_k needs B=", B, " entries; got ",
                        a.seqlen_k->numel());
  }
  const FmhaDropout d = fmha_dropout_args(a.dropout_p, a.rng_state, op);
  TORCH_CHECK_VALUE(d.p == 0.f || !given(a.block_tables), op, ": dropout (dropout_p=", a.dropout_p,
                    ") cannot be combined with paged K/V (block_tables)");
  return d;
}

FmhaUnpaged fmha_unpage(const FmhaFwdArgs& a) {
  const at::Tensor& k = a.k;
  auto bt = a.block_tables->to(at::kCPU).to(at::kLong);
  const int64_t page_size = a.page_size, n = bt.size(0), row = bt.size(1) * page_size, phys = k.size(1);
  const int64_t lo = bt.numel() ? bt.min().item<int64_t>() : 0, hi = bt.numel() ? bt.max().item<int64_t>() : 0;
  TORCH_CHECK_VALUE(lo >= 0 && (bt.numel() == 0 || (hi + 1) * page_size <= phys), a.op,
                    ": block_tables names pages outside the ", phys / page_size, " pages of k/v (values in [", lo,
                    ", ", hi, "])");
  auto offs = at::arange(page_size, at::TensorOptions().dtype(at::kLong));
  auto idx = (bt.unsqueeze(-1) * page_size + offs).reshape({n * row}).to(k.device());
  auto sk = a.seqstart_k->to(at::kCPU).to(at::kLong).narrow(0, 0, n) +
            at::arange(n, at::TensorOptions().dtype(at::kLong)) * row;
  auto lk = a.seqlen_k->to(at::kCPU).to(at::kLong);
  for (int64_t s = 0; s < n; ++s) {
    const int64_t st = sk[s].item<int64_t>() - s * row, len = lk[s].item<int64_t>();
    TORCH_CHECK_VALUE(st >= 0 && len >= 0 && st + len <= row, a.op, ": lane ", s, " keys [", st, ", ", st + len,
                      ") run past its ", row, " paged keys (block_tables.shape[1] * page_size)");
  }
  return {k.index_select(1, idx), a.v.index_select(1, idx), sk.to(at::kInt).to(a.q.device())};
}

std::tuple<at::Tensor, at::Tensor> fmha_fwd_exact(const FmhaFwdArgs& a, const FmhaDropout& drop, bool chunked) {
  const at::Tensor &q = a.q, &k = a.k, &v = a.v;
  if (given(a.block_tables)) {
    // Paged: every lane's pages gathered into one padded logical K/V, then the unpaged path.
    const FmhaUnpaged u = fmha_unpage(a);
    const std::optional<at::Tensor> sk = u.seqstart_k, none;
    return fmha_fwd_exact({q, u.k, u.v, a.bias, a.seqstart_q, sk, a.seqlen_k, a.max_seqlen_q, a.mask_kind,
                           a.window_left, a.window_right, a.scale, none, 0, 0.0, none, a.op},
                          FmhaDropout{}, chunked);
  }
  const int64_t B = q.size(0), Mq = q.size(1), H = q.size(2), Mkv = k.size(1);
  const FmhaMask mask = fmha_mask_make(B, Mq, Mkv, a.seqstart_q, a.seqstart_k, a.seqlen_k, a.mask_kind,
                                       a.window_left, a.window_right, a.op);
  if (drop.p > 0.f || chunked) {
    const FmhaKeepFn keep = [&](int64_t h0, int64_t nh, int64_t r0, int64_t nr) {
      return fmha_dropout_keep(drop, B, H, h0, nh, r0, nr, Mkv, q.device());
    };
    return fmha_reference_fwd_dropout({q, k, v, a.bias, mask, a.scale, drop.p > 0.f ? a.dropout_p : 0.0, &keep});
  }
  if (fmha_mask_trivial(mask)) return fmha_reference_fwd(q, k, v, a.bias, a.scale, q.scalar_type());
  const auto acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto dense = fmha_mask_additive(mask, 0, Mq, acc, q.device());
  if (given(a.bias)) dense = dense + a.bias->to(acc);
  return fmha_reference_fwd(q, k, v, dense, a.scale, q.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> fmha_fwd_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& seqstart_q, const std::optional<at::Tensor>& seqstart_k,
    const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q, int64_t mask_kind, int64_t window_left,
    int64_t window_right, double scale, const std::optional<at::Tensor>& block_tables, int64_t page_size,
    double dropout_p, const std::optional<at::Tensor>& rng_state) {
  const FmhaFwdArgs a{q,           k,     v,           bias,      seqstart_q, seqstart_k, seqlen_k,  max_seqlen_q,
                      mask_kind,   window_left, window_right, scale, block_tables, page_size, dropout_p, rng_state};
  return fmha_fwd_exact(a, fmha_fwd_check(a), false);
}

}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CPU, m) { m.impl("fmha_fused_fwd", &mslk::attention::fmha_fwd_cpu); }
