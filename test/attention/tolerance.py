"""Tolerances for fp16 / bf16 attention outputs and gradients that scale with each output row.

Forward. The kernels hold P = exp(S - rowmax) in the input dtype before the PV product (each
probability off by at most 2^-9 relative in bf16, 2^-11 in fp16, in random directions) and round
the output once to the dtype. Both errors stay within a few of those units of the largest |value|
of the row, so each output row (one query row of one head: all dims but the last) gets
atol = TOL_REL * max|want| over the row plus rtol = TOL_REL: 4 units (1/128 bf16, 1/512 fp16).
The absolute part is capped at ATOL_CAP, which rows of large values (a query that sees a few
keys) need with the tests' unit-variance inputs, and never drops below 1e-6 (a row with no
visible key must be 0).

Backward. dq / dk / dv rows sum over the sequence with P and dS = P * (dP - D) rounded to the
input dtype; their errors stay a few units of that rounding of each gradient row's largest |value|
(GRAD_TOL: 16 units, 1/32 bf16, 1/128 fp16). One difference is legitimate and not a rounding
of the row: D = rowsum(dO * O) is taken from the forward's rounded output by the fused kernels and
from P * dP (exact) by the general path. The two differ by the gradient of -sum_i dD_i * lse_i,
dD_i = rowsum(dO_i * (O_got_i - O_exact_i)), which can exceed a row's own scale where the row's
gradient cancels (a query that mostly sees one key); d_term_slack gives that difference and the
comparator admits it on top. No element's bound exceeds GRAD_TOL * max|want| over the whole
tensor."""

import torch

TOL_REL = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-9, torch.float32: 1e-5}
ATOL_CAP = {torch.bfloat16: 1.5e-2, torch.float16: 2e-3, torch.float32: 1e-5}
ZERO_ATOL = 1e-6
# float32: the error is the rounding of the K-term sum Q.K^T (orders differ between the GPU and the
# oracle), which exp() turns into a relative error of P: it grows with the head dim K (2.2e-5
# relative measured on the H100 at K=1024, scale 0.3), so the bound takes 4 units per term.
TOL_REL_F32_PER_K = 2.0**-22

GRAD_TOL = {torch.bfloat16: 2.0**-5, torch.float16: 2.0**-7}
# fp32 rounding of dP - D where the exact gradient is 0 (a query that sees one key: O = V exactly):
# two float32 sums of about |dO| |V| each that cancel, off by a few units of their last place
# (1.7e-5 measured on the H200 for a dbias entry whose exact value is 0), so the floor scales with the
# tensor's largest value.
GRAD_ATOL = 1e-5
GRAD_ATOL_REL = 2.0**-12


def _report(err, allow, got, want, what):
    bad = ~(err <= allow)  # NaN in got fails too
    if not bad.any():
        return
    i = tuple(int(x) for x in (bad.nonzero()[0]))
    ratio = (err / allow)[bad].max().item()
    raise AssertionError(f"{what}: {int(bad.sum())} of {bad.numel()} elements outside the bound (worst "
                         f"error/bound {ratio:.3g}); first at {list(i)}: got {got[i].item():.6g}, want "
                         f"{want[i].item():.6g}, bound {allow[i].item():.3g}")


def attention_bound(want, dtype, head_dim=None, v_max=None):
    """The allowed |got - want| of an attention output of `dtype` (the elementwise bound above);
    head_dim (Q's last dim) widens the float32 bound (TOL_REL_F32_PER_K). That error is a relative
    error of P, so it is in units of |V|, not of the output row (rows average V towards 0): v_max
    (max |V|) sets its absolute part."""
    want = want.detach().double()
    tol, cap = TOL_REL[dtype], ATOL_CAP[dtype]
    if dtype == torch.float32 and head_dim is not None:
        tol = max(tol, TOL_REL_F32_PER_K * head_dim)
        if v_max is not None:
            cap = max(cap, tol * float(v_max))
    rowmax = want.abs().amax(-1, keepdim=True)
    atol = (tol * rowmax).clamp(min=ZERO_ATOL, max=cap)
    if cap > ATOL_CAP[dtype]:  # rows that see a key (a row that sees none stays at ZERO_ATOL)
        atol = torch.where(rowmax > 0, torch.full_like(atol, cap), atol)
    return atol + tol * want.abs()


def assert_attention_close(got, want, dtype, what="attention output", head_dim=None, v_max=None):
    """got (an attention output computed in `dtype`) against want (the float64 oracle, same shape)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.numel() == 0:
        return
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    _report((got - want).abs(), attention_bound(want, dtype, head_dim, v_max), got, want, what)


def grad_bound(want, dtype, slack=None):
    want = want.detach().double()
    tol = GRAD_TOL[dtype]
    row = tol * want.abs().amax(-1, keepdim=True)
    if slack is not None:
        row = row + slack.detach().double()
    floor = GRAD_ATOL + GRAD_ATOL_REL * want.abs().max()
    return (torch.minimum(row, tol * want.abs().max()) + floor).expand_as(want)


def assert_grad_close(got, want, dtype, slack=None, what="gradient"):
    """A gradient computed in `dtype` against its float64 reference: per row (last dim) within
    GRAD_TOL of the row's largest |want|, plus `slack` (d_term_slack), capped at GRAD_TOL of the
    tensor's largest |want|."""
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if got.numel() == 0:
        return
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    slack = None if slack is None else slack.cpu()
    _report((got - want).abs(), grad_bound(want, dtype, slack), got, want, what)


def lse_f64(q, k, bias=None, scale=None):
    """Differentiable float64 log-sum-exp of the scores, [B, H, M], for q [B, M, H, K], k [B, N, H, K]
    and an additive bias (-inf: masked) broadcastable to [B, H, M, N]. A row with no visible key
    gives 0 and no gradient."""
    q, k = q.double(), k.double()
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = torch.einsum("bmhk,bnhk->bhmn", q, k) * scale
    if bias is not None:
        s = s + bias.double()
    dead = torch.isneginf(s).all(-1, keepdim=True)
    lse = torch.logsumexp(s.masked_fill(dead, 0.0), -1)
    return torch.where(dead[..., 0], torch.zeros_like(lse), lse)


def d_term_slack(lse, wrt, dout, out_got, out_want):
    """|gradient of -sum_i dD_i * lse_i| with respect to each tensor of wrt (None where lse does
    not depend on it): how far a backward that takes D from the forward's rounded output may be
    from the exact gradient. dout / out_got / out_want are [B, M, H, Kv], lse is [B, H, M]."""
    dd = (dout.detach().double().cpu() * (out_got.detach().double().cpu() - out_want.detach().double().cpu())).sum(-1)
    grads = torch.autograd.grad(lse, wrt, -dd.transpose(1, 2), retain_graph=True, allow_unused=True)
    return [None if g is None else g.abs() for g in grads]
