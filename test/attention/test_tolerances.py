"""The attention comparators of test/attention/tolerance.py on causal d = 128 problems (S = 4096
forward, 2048 backward; the CPU runs them). They accept a model of the fused kernels' arithmetic
(P and dS rounded to the input dtype, fp32 accumulation, D from the rounded output) and reject
the outputs of broken kernels that an absolute 2e-2 accepted: the last 128 keys dropped, a 2%
softmax-scale error, a zeroed row, a uniform bias of a few units of the row's largest value; for
the gradients, the same scale error, a dq gain error, a skipped key block, a zeroed row, D left
out."""

import functools
import math

import pytest
import torch

from test.attention import oracle
from test.attention.tolerance import assert_attention_close, assert_grad_close, d_term_slack, lse_f64

S_FWD, S_BWD, D, BLOCK = 4096, 2048, 128, 128  # the backward's float64 autograd at 4096 takes too long here
SCALE = D ** -0.5
DTYPES = [torch.bfloat16, torch.float16]


def kernel_fwd(q, k, v, mask, scale, dtype, keys=None):
    """The fused forward's arithmetic: P = exp(S - rowmax) rounded to dtype before the PV product
    (fp32 accumulation), the row sum from the fp32 P, the output rounded once (a blocked kernel's
    running max rescales P by factors that leave its relative rounding error as it is). keys:
    attends to the first `keys` keys only (a kernel that skips the rest). Returns out, lse."""
    q, k, v = (x.float() for x in (q, k, v))
    s = (q @ k.T) * scale + mask.float()
    if keys is not None:
        s[:, keys:] = -math.inf
    m = s.amax(1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(1, keepdim=True)
    return ((p.to(dtype).float() @ v) / l).to(dtype), (torch.log(l) + m).squeeze(1)


def kernel_bwd(q, k, v, dout, out, lse, mask, scale, dtype, d_exact=False, keys=None):
    """The fused backward's arithmetic: P = exp(S - lse) in fp32, P and dS = P * (dP - D) rounded to
    dtype before their products, D = rowsum(dO * O) from the given (rounded) output, or from
    P * dP (d_exact: the general path). keys: skips the keys past the first `keys`."""
    q, k, v, do = (x.float() for x in (q, k, v, dout))
    p = torch.exp((q @ k.T) * scale + mask.float() - lse[:, None])
    if keys is not None:
        p[:, keys:] = 0
    dp = do @ v.T
    d = (p * dp).sum(1, keepdim=True) if d_exact else (do * out.float()).sum(1, keepdim=True)
    ds = (p * (dp - d)).to(dtype).float()
    return (ds @ k * scale).to(dtype), (ds.T @ q * scale).to(dtype), (p.to(dtype).float().T @ do).to(dtype)


def inputs(n, S, seed):
    """n random [S, D] tensors whose values bf16 and fp16 both hold exactly (one oracle serves both)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(S, D, generator=g).to(torch.bfloat16).double()
        out.append(torch.where(x.abs() < 2.0**-14, torch.zeros_like(x), x))
    return out


def causal(S):
    return torch.full((S, S), -math.inf, dtype=torch.float64).triu(1)


@functools.lru_cache(maxsize=None)
def fwd_problem():
    q, k, v = inputs(3, S_FWD, 0)
    mask = causal(S_FWD)
    out, _ = oracle.attention_f64(q[None, :, None], k[None, :, None], v[None, :, None], mask, SCALE)
    return dict(q=q, k=k, v=v, mask=mask, out=out[0, :, 0])


@functools.lru_cache(maxsize=None)
def fwd_kernel(dtype, keys=None):
    p = fwd_problem()
    return kernel_fwd(p["q"].to(dtype), p["k"].to(dtype), p["v"].to(dtype), p["mask"], SCALE, dtype, keys)[0]


@functools.lru_cache(maxsize=None)
def bwd_oracle():
    q, k, v, do = inputs(4, S_BWD, 1)
    mask = causal(S_BWD)
    leaves = [x[None, :, None].requires_grad_() for x in (q, k, v)]
    out, _ = oracle.attention_f64(*leaves, mask, SCALE)
    grads = torch.autograd.grad(out, leaves, do[None, :, None])
    return dict(q=q, k=k, v=v, do=do, mask=mask, leaves=leaves, out=out.detach(),
                lse=lse_f64(leaves[0], leaves[1], mask, SCALE), grads=[x[0, :, 0] for x in grads])


@functools.lru_cache(maxsize=None)
def bwd_problem(dtype):
    """The oracle's gradients, the kernel model's forward (out, lse) in dtype and the D-term slack."""
    p = dict(bwd_oracle())
    q, k, v, do = (p[n].to(dtype) for n in ("q", "k", "v", "do"))
    got, got_lse = kernel_fwd(q, k, v, p["mask"], SCALE, dtype)
    slack = d_term_slack(p["lse"], p["leaves"], do[None, :, None], got[None, :, None], p["out"])
    p.update(q=q, k=k, v=v, do=do, got=got, got_lse=got_lse, slack=[None if x is None else x[0, :, 0] for x in slack])
    return p


def rows_oracle(rows, scale):
    """float64 output of the query rows `rows` of the forward problem."""
    p = fwd_problem()
    q, k, v = (p[n][None, :, None] for n in ("q", "k", "v"))
    out, _ = oracle.attention_f64(q[:, rows], k, v, p["mask"][rows], scale)
    return out[0, :, 0]


# ---- forward ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_accepts_the_kernel_model_and_the_rounded_oracle(dtype):
    want = fwd_problem()["out"]
    assert_attention_close(fwd_kernel(dtype), want, dtype)
    assert_attention_close(want.to(dtype), want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_rejects_the_last_128_keys_dropped(dtype):
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_attention_close(fwd_kernel(dtype, keys=S_FWD - 128), fwd_problem()["out"], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_rejects_a_2_percent_softmax_scale_error(dtype):
    rows = torch.arange(0, S_FWD, 16)
    bad = fwd_kernel(dtype).clone()
    bad[rows] = rows_oracle(rows, SCALE * 1.02).to(dtype)
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_attention_close(bad, fwd_problem()["out"], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_rejects_a_zeroed_row_and_a_bias_of_three_units(dtype):
    want = fwd_problem()["out"]
    bad = fwd_kernel(dtype).clone()
    bad[3000] = 0
    with pytest.raises(AssertionError, match=r"first at \[3000, "):
        assert_attention_close(bad, want, dtype)
    # every element moved by 3 units of the dtype's rounding of its row's largest value
    rowmax = want.abs().amax(-1, keepdim=True)
    ulp = torch.exp2(torch.floor(torch.log2(rowmax)) - (7 if dtype == torch.bfloat16 else 10))
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_attention_close((want + 3 * ulp).to(dtype), want, dtype)


def test_forward_fully_masked_rows_must_be_zero():
    want = torch.zeros(2, 8, dtype=torch.float64)
    assert_attention_close(torch.zeros(2, 8, dtype=torch.bfloat16), want, torch.bfloat16)
    with pytest.raises(AssertionError):
        assert_attention_close(torch.full((2, 8), 1e-4), want, torch.bfloat16)


# ---- backward -----------------------------------------------------------------------------------

def bwd(p, dtype, **kw):
    return kernel_bwd(p["q"], p["k"], p["v"], p["do"], p["got"], p["got_lse"], p["mask"], kw.pop("scale", SCALE),
                      dtype, **kw)


def check_grads(got, p, dtype):
    for name, a, w, s in zip(("dq", "dk", "dv"), got, p["grads"], p["slack"]):
        assert_grad_close(a, w, dtype, s, what=name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d_exact", [False, True])
def test_backward_accepts_the_kernel_model(dtype, d_exact):
    p = bwd_problem(dtype)
    check_grads(bwd(p, dtype, d_exact=d_exact), p, dtype)


# A 2% softmax-scale error; the last key block dropped.
BWD_MUTATIONS = {"scale_2_percent": dict(scale=SCALE * 1.02), "last_key_block_dropped": dict(keys=S_BWD - BLOCK)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mutation", BWD_MUTATIONS)
def test_backward_rejects_every_gradient_of(mutation, dtype):
    p = bwd_problem(dtype)
    got = bwd(p, dtype, **BWD_MUTATIONS[mutation])
    for name, a, w, s in zip(("dq", "dk", "dv"), got, p["grads"], p["slack"]):
        with pytest.raises(AssertionError, match="outside the bound"):
            assert_grad_close(a, w, dtype, s, what=name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_rejects_a_dq_gain_error(dtype):
    p = bwd_problem(dtype)
    dq, _, _ = bwd(p, dtype)
    gain = 1.05 if dtype == torch.bfloat16 else 1.02  # a few times the kernel's own error
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_grad_close((dq.double() * gain).to(dtype), p["grads"][0], dtype, p["slack"][0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_rejects_a_zeroed_row_and_d_left_out(dtype):
    p = bwd_problem(dtype)
    dq, dk, dv = bwd(p, dtype)
    bad = dv.clone()
    bad[1000] = 0
    with pytest.raises(AssertionError, match=r"first at \[1000, "):
        assert_grad_close(bad, p["grads"][2], dtype, p["slack"][2])
    zero_d, _, _ = kernel_bwd(p["q"], p["k"], p["v"], p["do"], torch.zeros_like(p["got"]), p["got_lse"], p["mask"],
                              SCALE, dtype)
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_grad_close(zero_d, p["grads"][0], dtype, p["slack"][0])
