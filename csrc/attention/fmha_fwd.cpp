// mslk::fmha_fused_fwd: argument checks shared by every backend, and the CPU implementation, which
// builds the dense additive mask of the descriptor and runs the exact reference forward.
#include "attention/fmha_fwd.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>

#include "attention/fmha_reference.h"
#include "common/checks.h"

namespace mslk::attention {
namespace {
constexpr const char* kOp = "mslk::fmha_fused_fwd";

void check_seq_tensor(const std::optional<at::Tensor>& t, const at::Tensor& q, const char* name) {
  if (!t.has_value() || !t->defined()) return;
  check_dtype(*t, kOp, name, {at::kInt});
  check_dim(*t, kOp, name, 1, 1);
  check_same_device(*t, q, kOp, name, "q");
}

bool given(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// [lq, lk] boolean: key j allowed for query i under (mask_kind, window_left, window_right).
at::Tensor block_allowed(int64_t lq, int64_t lk, int64_t kind, int64_t wl, int64_t wr) {
  auto opts = at::TensorOptions().dtype(at::kLong);
  auto i = at::arange(lq, opts).unsqueeze(1);
  auto j = at::arange(lk, opts).unsqueeze(0);
  const int64_t shift = (kind == 2 || kind == 3) ? lk - lq : 0;
  auto d = j - i - shift;
  auto allowed = at::ones({lq, lk}, at::TensorOptions().dtype(at::kBool));
  if (kind == 1 || kind == 2) allowed = allowed & (d <= 0);
  if (wl >= 0) allowed = allowed & (d >= -wl);
  if (wr >= 0) allowed = allowed & (d <= wr);
  return allowed;
}
}  // namespace

void fmha_fwd_check(const FmhaFwdArgs& a) {
  const auto &q = a.q, &k = a.k, &v = a.v;
  check_dim(q, kOp, "q", 4, 4);
  check_dim(k, kOp, "k", 4, 4);
  check_dim(v, kOp, "v", 4, 4);
  TORCH_CHECK_TYPE(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), kOp,
                   ": q, k, v must share a dtype; got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
                   v.scalar_type());
  check_same_device(k, q, kOp, "k", "q");
  check_same_device(v, q, kOp, "v", "q");
  const int64_t B = q.size(0), H = q.size(2), K = q.size(3), Mkv = k.size(1);
  TORCH_CHECK_VALUE(k.size(0) == B && v.size(0) == B, kOp, ": batch sizes differ: q ", B, ", k ", k.size(0),
                    ", v ", v.size(0));
  TORCH_CHECK_VALUE(k.size(2) == H && v.size(2) == H, kOp, ": head counts differ: q ", H, ", k ", k.size(2),
                    ", v ", v.size(2), " (expand K/V heads explicitly for GQA/MQA)");
  TORCH_CHECK_VALUE(v.size(1) == Mkv, kOp, ": k has ", Mkv, " keys but v has ", v.size(1));
  TORCH_CHECK_VALUE(k.size(3) == K, kOp, ": q head dim ", K, " != k head dim ", k.size(3));
  check_last_dim_contiguous(q, kOp, "q");
  check_last_dim_contiguous(k, kOp, "k");
  check_last_dim_contiguous(v, kOp, "v");
  TORCH_CHECK_VALUE(a.mask_kind >= 0 && a.mask_kind <= 3, kOp,
                    ": mask_kind must be 0 (none), 1 (causal top-left), 2 (causal bottom-right) or 3 (local "
                    "bottom-right); got ", a.mask_kind);
  if (given(a.bias)) {
    const auto& b = *a.bias;
    check_same_device(b, q, kOp, "bias", "q");
    TORCH_CHECK_VALUE(b.dim() <= 4, kOp, ": bias must broadcast to [B, H, Mq, Mkv]; got shape ", b.sizes());
    const int64_t full[4] = {B, H, q.size(1), Mkv};
    for (int64_t i = 0; i < b.dim(); ++i) {
      const int64_t want = full[4 - b.dim() + i], got = b.size(i);
      TORCH_CHECK_VALUE(got == want || got == 1, kOp, ": bias of shape ", b.sizes(),
                        " does not broadcast to [B, H, Mq, Mkv] = [", B, ", ", H, ", ", q.size(1), ", ", Mkv, "]");
    }
  }
  check_seq_tensor(a.seqstart_q, q, "seqstart_q");
  check_seq_tensor(a.seqstart_k, q, "seqstart_k");
  check_seq_tensor(a.seqlen_k, q, "seqlen_k");
  if (given(a.seqstart_q)) {
    TORCH_CHECK_VALUE(B == 1, kOp, ": variable-length inputs (seqstart_q given) are packed into batch 1; got B=", B);
    TORCH_CHECK_VALUE(given(a.seqstart_k), kOp, ": seqstart_q needs seqstart_k");
    const int64_t n = a.seqstart_q->numel() - 1;
    TORCH_CHECK_VALUE(n >= 1, kOp, ": seqstart_q must hold at least 2 entries; got ", a.seqstart_q->numel());
    if (given(a.seqlen_k)) {
      TORCH_CHECK_VALUE(a.seqlen_k->numel() == n && a.seqstart_k->numel() >= n, kOp, ": with ", n,
                        " sequences, seqlen_k needs ", n, " entries and seqstart_k at least ", n, "; got ",
                        a.seqlen_k->numel(), " and ", a.seqstart_k->numel());
    } else {
      TORCH_CHECK_VALUE(a.seqstart_k->numel() == n + 1, kOp, ": seqstart_k needs ", n + 1, " entries; got ",
                        a.seqstart_k->numel());
    }
    if (given(a.block_tables)) {
      const auto& bt = *a.block_tables;
      check_dtype(bt, kOp, "block_tables", {at::kInt});
      check_dim(bt, kOp, "block_tables", 2, 2);
      check_same_device(bt, q, kOp, "block_tables", "q");
      TORCH_CHECK_VALUE(bt.size(0) == n, kOp, ": block_tables needs one row per sequence (", n, "), got shape ",
                        bt.sizes());
      TORCH_CHECK_VALUE(a.page_size > 0 && a.page_size < (int64_t(1) << 31), kOp,
                        ": paged K/V needs 0 < page_size < 2^31, got ", a.page_size);
      TORCH_CHECK_VALUE(given(a.seqlen_k), kOp, ": paged K/V needs seqlen_k (the key count of each lane)");
      TORCH_CHECK_VALUE(!given(a.bias), kOp, ": a tensor bias cannot be combined with paged K/V");
      TORCH_CHECK_VALUE(bt.size(1) * a.page_size < (int64_t(1) << 31), kOp,
                        ": block_tables.shape[1] * page_size must be < 2^31");
    }
  } else {
    TORCH_CHECK_VALUE(!given(a.block_tables), kOp, ": block_tables (paged K/V) needs seqstart_q (varlen)");
    TORCH_CHECK_VALUE(!given(a.seqstart_k), kOp, ": seqstart_k given without seqstart_q");
    if (given(a.seqlen_k))
      TORCH_CHECK_VALUE(a.seqlen_k->numel() == B, kOp, ": seqlen_k needs B=", B, " entries; got ",
                        a.seqlen_k->numel());
  }
}

std::tuple<at::Tensor, at::Tensor> fmha_fwd_cpu(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& seqstart_q, const std::optional<at::Tensor>& seqstart_k,
    const std::optional<at::Tensor>& seqlen_k, int64_t max_seqlen_q, int64_t mask_kind, int64_t window_left,
    int64_t window_right, double scale, const std::optional<at::Tensor>& block_tables, int64_t page_size) {
  fmha_fwd_check({q, k, v, bias, seqstart_q, seqstart_k, seqlen_k, max_seqlen_q, mask_kind, window_left,
                  window_right, scale, block_tables, page_size});
  if (given(block_tables)) {
    // Paged: gather every lane's pages into one padded logical K/V, then the unpaged path.
    auto bt = block_tables->to(at::kCPU).to(at::kLong);
    const int64_t n = bt.size(0), row = bt.size(1) * page_size, phys = k.size(1);
    const int64_t lo = bt.numel() ? bt.min().item<int64_t>() : 0, hi = bt.numel() ? bt.max().item<int64_t>() : 0;
    TORCH_CHECK_VALUE(lo >= 0 && (bt.numel() == 0 || (hi + 1) * page_size <= phys), kOp,
                      ": block_tables names pages outside the ", phys / page_size, " pages of k/v (values in [", lo,
                      ", ", hi, "])");
    auto offs = at::arange(page_size, at::TensorOptions().dtype(at::kLong));
    auto idx = (bt.unsqueeze(-1) * page_size + offs).reshape({n * row}).to(k.device());
    auto kl = k.index_select(1, idx), vl = v.index_select(1, idx);
    auto sk = seqstart_k->to(at::kCPU).to(at::kLong).narrow(0, 0, n) +
              at::arange(n, at::TensorOptions().dtype(at::kLong)) * row;
    auto lk = seqlen_k->to(at::kCPU).to(at::kLong);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t st = sk[s].item<int64_t>() - s * row, len = lk[s].item<int64_t>();
      TORCH_CHECK_VALUE(st >= 0 && len >= 0 && st + len <= row, kOp, ": lane ", s, " keys [", st, ", ", st + len,
                        ") run past its ", row, " paged keys (block_tables.shape[1] * page_size)");
    }
    return fmha_fwd_cpu(q, kl, vl, bias, seqstart_q, sk.to(at::kInt).to(q.device()), seqlen_k, max_seqlen_q,
                        mask_kind, window_left, window_right, scale, std::nullopt, 0);
  }
  const int64_t B = q.size(0), Mq = q.size(1), Mkv = k.size(1);
  const bool dbl = q.scalar_type() == at::kDouble;
  const auto acc = dbl ? at::kDouble : at::kFloat;
  at::Tensor allowed;  // [B or 1, 1, Mq, Mkv]
  if (given(seqstart_q)) {
    auto sq = seqstart_q->to(at::kCPU).to(at::kLong), sk = seqstart_k->to(at::kCPU).to(at::kLong);
    auto lk_t = given(seqlen_k) ? std::optional<at::Tensor>(seqlen_k->to(at::kCPU).to(at::kLong)) : std::nullopt;
    allowed = at::zeros({Mq, Mkv}, at::TensorOptions().dtype(at::kBool));
    const int64_t n = sq.numel() - 1;
    for (int64_t s = 0; s < n; ++s) {
      const int64_t q0 = sq[s].item<int64_t>(), lq = sq[s + 1].item<int64_t>() - q0;
      const int64_t k0 = sk[s].item<int64_t>();
      const int64_t lk = lk_t ? (*lk_t)[s].item<int64_t>() : sk[s + 1].item<int64_t>() - k0;
      TORCH_CHECK_VALUE(q0 >= 0 && lq >= 0 && q0 + lq <= Mq, kOp, ": query block ", s, " [", q0, ", ", q0 + lq,
                        ") is outside [0, Mq=", Mq, ")");
      TORCH_CHECK_VALUE(k0 >= 0 && lk >= 0 && k0 + lk <= Mkv, kOp, ": key lane ", s, " [", k0, ", ", k0 + lk,
                        ") is outside [0, Mkv=", Mkv, ")");
      if (lq > 0 && lk > 0)
        allowed.narrow(0, q0, lq).narrow(1, k0, lk).copy_(block_allowed(lq, lk, mask_kind, window_left, window_right));
    }
    allowed = allowed.view({1, 1, Mq, Mkv});
  } else {
    allowed = at::zeros({B, 1, Mq, Mkv}, at::TensorOptions().dtype(at::kBool));
    auto lk_t = given(seqlen_k) ? std::optional<at::Tensor>(seqlen_k->to(at::kCPU).to(at::kLong)) : std::nullopt;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t lk = lk_t ? (*lk_t)[b].item<int64_t>() : Mkv;
      TORCH_CHECK_VALUE(lk >= 0 && lk <= Mkv, kOp, ": seqlen_k[", b, "]=", lk, " is outside [0, Mkv=", Mkv, "]");
      if (Mq > 0 && lk > 0)
        allowed[b][0].narrow(1, 0, lk).copy_(block_allowed(Mq, lk, mask_kind, window_left, window_right));
    }
  }
  auto dense = at::zeros(allowed.sizes(), at::TensorOptions().dtype(acc))
                   .masked_fill_(allowed.logical_not(), -std::numeric_limits<double>::infinity())
                   .to(q.device());
  if (given(bias)) dense = dense + bias->to(acc);
  auto [out, lse] = fmha_reference_fwd(q, k, v, dense, scale, q.scalar_type());
  return {out, lse};
}

}  // namespace mslk::attention

TORCH_LIBRARY_IMPL(mslk, CPU, m) { m.impl("fmha_fused_fwd", &mslk::attention::fmha_fwd_cpu); }
