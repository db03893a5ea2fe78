// Reference attention forward with dropout and the reference backward (fmha_reference_bwd.h).
// Backward of out = (P o Z) V, Z = keep / (1 - p), P = exp(S - lse), S = scale q k^T + mask + bias:
//   dV = (P o Z)^T dO,  dP = (dO V^T) o Z,  dS = P o (dP - rowsum(P o dP)),
//   dQ = scale dS K,  dK = scale dS^T Q,  dbias = dS summed over bias's broadcast dims.
// rowsum(P o dP) is taken from the recomputed P (equal to rowsum(dO o out) when lse is exact),
// so the given `out` is not needed.
#include "attention/fmha_reference_bwd.h"
#include "common/checks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace mslk::attention {
namespace {

// Score elements materialized at once. On the CPU a smaller chunk costs nothing and keeps memory
// low; on the GPU a larger one amortizes launches (a few float32 temporaries of 128 MiB each).
int64_t chunk_budget(const at::Device& d) { return d.is_cpu() ? int64_t(1) << 20 : int64_t(1) << 25; }

// Runs f(h0, nh, r0, nr) over chunks of heads (whole query range) or, when one head is over the
// budget, over chunks of query rows of one head.
template <class F>
void for_chunks(int64_t B, int64_t H, int64_t Mq, int64_t Mkv, int64_t budget, F&& f) {
  const int64_t per_head = B * Mq * std::max<int64_t>(Mkv, 1);
  if (B == 0 || H == 0 || Mq == 0) return;
  if (per_head <= budget) {
    const int64_t nh = std::min(H, std::max<int64_t>(1, budget / per_head));
    for (int64_t h0 = 0; h0 < H; h0 += nh) f(h0, std::min(nh, H - h0), int64_t(0), Mq);
    return;
  }
  const int64_t nr = std::max<int64_t>(1, budget / (B * std::max<int64_t>(Mkv, 1)));
  for (int64_t r0 = 0; r0 < Mq; r0 += nr)
    for (int64_t h0 = 0; h0 < H; ++h0) f(h0, int64_t(1), r0, std::min(nr, Mq - r0));
}

// Inputs in the accumulation dtype, [B, H, M, D] views, and the pieces every chunk needs.
struct Prepared {
  at::ScalarType acc;
  at::Tensor qf, kf, vf;
  at::Tensor bias4;  // bias viewed as 4-D (leading 1s), or undefined
  at::Tensor mask;   // additive mask of rows [mask_r0, + mask.size(2)), or undefined
  int64_t mask_r0 = -1;
  bool trivial_mask;

  explicit Prepared(const FmhaRefInputs& in) {
    acc = in.q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    qf = in.q.to(acc).permute({0, 2, 1, 3});
    kf = in.k.to(acc).permute({0, 2, 1, 3});
    vf = in.v.to(acc).permute({0, 2, 1, 3});
    if (given(in.bias)) {
      std::vector<int64_t> shape(4 - in.bias->dim(), 1);
      for (int64_t s : in.bias->sizes()) shape.push_back(s);
      bias4 = in.bias->view(shape);
    }
    trivial_mask = fmha_mask_trivial(in.mask);
  }

  // S of heads [h0, + nh), rows [r0, + nr): [B, nh, nr, Mkv].
  at::Tensor scores(const FmhaRefInputs& in, int64_t h0, int64_t nh, int64_t r0, int64_t nr) {
    auto qc = qf.narrow(1, h0, nh).narrow(2, r0, nr);
    auto s = at::matmul(qc, kf.narrow(1, h0, nh).transpose(-1, -2)).mul_(in.scale);
    if (!trivial_mask) {
      if (mask_r0 != r0 || mask.size(2) != nr) {
        mask = fmha_mask_additive(in.mask, r0, nr, acc, in.q.device());
        mask_r0 = r0;
      }
      s.add_(mask);
    }
    if (bias4.defined()) s.add_(narrow_bias(bias4, h0, nh, r0, nr).to(acc));
    return s;
  }

  // Dropout factor Z = keep / (1 - p) of the chunk, or undefined without dropout.
  at::Tensor dropout(const FmhaRefInputs& in, int64_t h0, int64_t nh, int64_t r0, int64_t nr) const {
    if (in.dropout_p <= 0.0) return {};
    auto keep = (*in.keep)(h0, nh, r0, nr);
    return keep.to(acc).mul_(1.0 / (1.0 - in.dropout_p));
  }

  // The chunk's slice of a bias-shaped 4-D tensor (broadcast dims stay size 1).
  static at::Tensor narrow_bias(const at::Tensor& b4, int64_t h0, int64_t nh, int64_t r0, int64_t nr) {
    auto b = b4;
    if (b.size(1) != 1) b = b.narrow(1, h0, nh);
    if (b.size(2) != 1) b = b.narrow(2, r0, nr);
    return b;
  }
};

}  // namespace

std::tuple<at::Tensor, at::Tensor> fmha_reference_fwd_dropout(const FmhaRefInputs& in) {
  const int64_t B = in.q.size(0), Mq = in.q.size(1), H = in.q.size(2), Mkv = in.k.size(1), Kv = in.v.size(3);
  Prepared pr(in);
  auto out = at::zeros({B, H, Mq, Kv}, pr.qf.options());
  auto lse = at::full({B, H, Mq}, -std::numeric_limits<double>::infinity(), pr.qf.options());
  for_chunks(B, H, Mq, Mkv, chunk_budget(in.q.device()), [&](int64_t h0, int64_t nh, int64_t r0, int64_t nr) {
    auto s = pr.scores(in, h0, nh, r0, nr);
    auto l = at::logsumexp(s, -1);  // -inf where every key is masked (or Mkv == 0)
    auto safe = at::where(at::isinf(l) & (l < 0), at::zeros({}, l.options()), l);
    auto p = at::exp(s - safe.unsqueeze(-1));
    if (auto z = pr.dropout(in, h0, nh, r0, nr); z.defined()) p.mul_(z);
    out.narrow(1, h0, nh).narrow(2, r0, nr).copy_(at::matmul(p, pr.vf.narrow(1, h0, nh)));
    lse.narrow(1, h0, nh).narrow(2, r0, nr).copy_(l);
  });
  return {out.permute({0, 2, 1, 3}).to(in.q.scalar_type()).contiguous(), lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fmha_reference_bwd(const FmhaRefInputs& in,
                                                                              const at::Tensor& grad_out,
                                                                              const at::Tensor& lse,
                                                                              bool bias_requires_grad) {
  const int64_t B = in.q.size(0), Mq = in.q.size(1), H = in.q.size(2), Mkv = in.k.size(1);
  const int64_t K = in.q.size(3), Kv = in.v.size(3);
  Prepared pr(in);
  auto dof = grad_out.to(pr.acc).permute({0, 2, 1, 3});  // [B, H, Mq, Kv]
  auto lsef = lse.to(pr.acc);
  auto opts = pr.qf.options();
  auto dq = at::zeros({B, H, Mq, K}, opts), dk = at::zeros({B, H, Mkv, K}, opts), dv = at::zeros({B, H, Mkv, Kv}, opts);
  const bool want_dbias = bias_requires_grad && pr.bias4.defined();
  at::Tensor dbias4 = want_dbias ? at::zeros(pr.bias4.sizes(), opts) : at::Tensor();
  for_chunks(B, H, Mq, Mkv, chunk_budget(in.q.device()), [&](int64_t h0, int64_t nh, int64_t r0, int64_t nr) {
    auto qc = pr.qf.narrow(1, h0, nh).narrow(2, r0, nr);
    auto kc = pr.kf.narrow(1, h0, nh), vc = pr.vf.narrow(1, h0, nh);
    auto doc = dof.narrow(1, h0, nh).narrow(2, r0, nr);
    auto l = lsef.narrow(1, h0, nh).narrow(2, r0, nr).unsqueeze(-1);
    auto dead = at::isinf(l) & (l < 0);  // rows with no allowed key: P = 0
    auto p = at::exp(pr.scores(in, h0, nh, r0, nr).sub_(at::where(dead, at::zeros({}, l.options()), l)));
    p.masked_fill_(dead, 0);
    auto dp = at::matmul(doc, vc.transpose(-1, -2));
    auto z = pr.dropout(in, h0, nh, r0, nr);
    auto pz = z.defined() ? p * z : p;
    if (z.defined()) dp.mul_(z);
    dv.narrow(1, h0, nh).add_(at::matmul(pz.transpose(-1, -2), doc));
    auto ds = p.mul_(dp - (p * dp).sum(-1, true));  // p is dead after this: reuse its storage
    dq.narrow(1, h0, nh).narrow(2, r0, nr).add_(at::matmul(ds, kc).mul_(in.scale));
    dk.narrow(1, h0, nh).add_(at::matmul(ds.transpose(-1, -2), qc).mul_(in.scale));
    if (want_dbias) {
      auto g = ds;
      for (int64_t d = 0; d < 4; ++d)
        if (pr.bias4.size(d) == 1 && g.size(d) != 1) g = g.sum(d, true);
      Prepared::narrow_bias(dbias4, h0, nh, r0, nr).add_(g);
    }
  });
  auto back = [&](const at::Tensor& t) { return t.permute({0, 2, 1, 3}).to(in.q.scalar_type()).contiguous(); };
  at::Tensor dbias = want_dbias ? dbias4.view(in.bias->sizes()).to(in.bias->scalar_type()).contiguous()
                                : at::empty({0}, in.q.options());
  return {back(dq), back(dk), back(dv), dbias};
}

}  // namespace mslk::attention
