"""mslk::fmha_fused_bwd, the dropout of mslk::fmha_fused_fwd and mslk::fmha_dropout_mask at the op
level: the CPU reference against float64 autograd of plain softmax attention (mask built from the
contract in attention_ops.cpp), and the CUDA ops against the CPU float64 result."""

import math

import pytest
import torch

from test.attention.tolerance import GRAD_TOL, assert_attention_close, assert_grad_close, d_term_slack, lse_f64

HAS_OP = hasattr(torch.ops.mslk, "fmha_fused_bwd")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

FWD = torch.ops.mslk.fmha_fused_fwd if HAS_OP else None
BWD = torch.ops.mslk.fmha_fused_bwd if HAS_OP else None
MASK = torch.ops.mslk.fmha_dropout_mask if HAS_OP else None

# (mask_kind, window_left, window_right)
MASKS = [(0, -1, -1), (1, -1, -1), (2, -1, -1), (3, 2, 1), (3, 0, 0), (1, 3, -1), (2, 2, -1), (0, 1, 2)]


# ---- oracle -----------------------------------------------------------------------------------

def block_allowed(lq, lk, kind, wl, wr):
    """[lq, lk] bool from the contract: d = j - i - shift, shift = lk - lq for kinds 2 and 3."""
    i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
    d = j - i - ((lk - lq) if kind in (2, 3) else 0)
    ok = torch.ones(lq, lk, dtype=torch.bool)
    if kind in (1, 2):
        ok &= d <= 0
    if wl >= 0:
        ok &= d >= -wl
    if wr >= 0:
        ok &= d <= wr
    return ok


def dense_allowed(B, mq, mkv, kind, wl, wr, seqlen_k=None):
    ok = torch.zeros(B, 1, mq, mkv, dtype=torch.bool)
    for b in range(B):
        lk = mkv if seqlen_k is None else seqlen_k[b]
        ok[b, 0, :, :lk] = block_allowed(mq, lk, kind, wl, wr)
    return ok


def varlen_allowed(q_lens, k_starts, k_lens, mkv, kind, wl, wr):
    ok = torch.zeros(1, 1, sum(q_lens), mkv, dtype=torch.bool)
    q0 = 0
    for lq, k0, lk in zip(q_lens, k_starts, k_lens):
        ok[0, 0, q0:q0 + lq, k0:k0 + lk] = block_allowed(lq, lk, kind, wl, wr)
        q0 += lq
    return ok


def attention(q, k, v, allowed, bias=None, scale=1.0, keep=None, p=0.0):
    """Plain softmax attention in float64 (differentiable): out [B, M, H, Kv], lse [B, H, M].
    Rows with no allowed key give out 0, lse -inf."""
    s = torch.einsum("bmhk,bnhk->bhmn", q.double(), k.double()) * scale
    if bias is not None:
        s = s + bias.double()
    s = s.masked_fill(~allowed, -math.inf)
    lse = torch.logsumexp(s, -1)
    dead = torch.isinf(lse)[..., None]
    pr = torch.exp(s - torch.where(dead, 0.0, lse[..., None])).masked_fill(dead, 0.0)
    if keep is not None:
        pr = pr * keep / (1.0 - p)
    return torch.einsum("bhmn,bnhk->bmhk", pr, v.double()), lse


def rand(shape, dtype=torch.float64, gen=None, device="cpu"):
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)


def rng(seed, offset=0):
    return torch.tensor([seed, offset], dtype=torch.int64)


def check_grads(q, k, v, allowed, bias, scale, kw, keep=None, p=0.0, atol=1e-10, gen=None):
    """The op's forward and backward on the CPU against float64 autograd of `attention`."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    b_leaf = bias.detach().double().requires_grad_() if bias is not None else None
    want_out, want_lse = attention(*leaves, allowed, b_leaf, scale, keep, p)
    out, lse = FWD(q, k, v, bias, scale=scale, **kw)
    torch.testing.assert_close(out.double(), want_out.detach(), atol=atol, rtol=atol)
    torch.testing.assert_close(lse.double(), want_lse.detach(), atol=atol, rtol=atol)
    dout = rand(out.shape, q.dtype, gen)
    inputs = leaves + ([b_leaf] if b_leaf is not None else [])
    want = torch.autograd.grad(want_out, inputs, dout.double())
    got = BWD(dout, q, k, v, out, lse, bias, scale=scale, bias_requires_grad=bias is not None, **kw)
    for name, g, w in zip(("dq", "dk", "dv", "dbias"), got, want):
        assert g.shape == w.shape and g.is_contiguous(), name
        scale_ = max(w.abs().max().item(), 1.0)
        torch.testing.assert_close(g.double(), w, atol=atol * scale_, rtol=atol, msg=lambda m: f"{name}: {m}")
    if bias is None:
        assert got[3].numel() == 0
    else:
        assert got[3].dtype == bias.dtype
    return got


# ---- CPU: masks, sequences, bias, dims ---------------------------------------------------------

@pytest.mark.parametrize("mq,mkv", [(1, 1), (7, 7), (7, 13), (13, 7), (127, 127)])
@pytest.mark.parametrize("kind,wl,wr", MASKS)
def test_cpu_masks(mq, mkv, kind, wl, wr):
    g = torch.Generator().manual_seed(mq * 1000 + mkv * 10 + kind)
    B, H, K, Kv = 2, 2, 16, 8
    q, k, v = rand((B, mq, H, K), gen=g), rand((B, mkv, H, K), gen=g), rand((B, mkv, H, Kv), gen=g)
    kw = dict(mask_kind=kind, window_left=wl, window_right=wr)
    check_grads(q, k, v, dense_allowed(B, mq, mkv, kind, wl, wr), None, 0.3, kw, gen=g)


@pytest.mark.parametrize("kind,wl,wr", [(0, -1, -1), (1, -1, -1), (2, -1, -1), (3, 1, 2)])
def test_cpu_seqlen_k(kind, wl, wr):
    g = torch.Generator().manual_seed(kind)
    B, mq, mkv, H = 3, 6, 9, 2
    lens = [9, 0, 4]
    q, k, v = rand((B, mq, H, 8), gen=g), rand((B, mkv, H, 8), gen=g), rand((B, mkv, H, 24), gen=g)
    kw = dict(seqlen_k=torch.tensor(lens, dtype=torch.int32), mask_kind=kind, window_left=wl, window_right=wr)
    dq, dk, dv, _ = check_grads(q, k, v, dense_allowed(B, mq, mkv, kind, wl, wr, lens), None, 0.5, kw, gen=g)
    assert dk[1].abs().max() == 0 and dq[1].abs().max() == 0 and dv[2, 4:].abs().max() == 0


@pytest.mark.parametrize("kind,wl,wr", [(0, -1, -1), (1, -1, -1), (2, -1, -1), (3, 1, 0), (1, 2, -1)])
@pytest.mark.parametrize("padded", [False, True])
def test_cpu_varlen(kind, wl, wr, padded):
    g = torch.Generator().manual_seed(kind * 2 + padded)
    q_lens, k_lens = [3, 0, 5, 1, 4], [4, 2, 0, 6, 4]
    if padded:  # lanes start at multiples of 8, seqlen_k gives their lengths
        k_starts, mkv = [8 * s for s in range(len(k_lens))], 8 * len(k_lens)
    else:
        k_starts, mkv = [sum(k_lens[:s]) for s in range(len(k_lens))], sum(k_lens)
    H, mq = 3, sum(q_lens)
    q, k, v = rand((1, mq, H, 16), gen=g), rand((1, mkv, H, 16), gen=g), rand((1, mkv, H, 16), gen=g)
    sq = torch.tensor([sum(q_lens[:s]) for s in range(len(q_lens) + 1)], dtype=torch.int32)
    kw = dict(seqstart_q=sq, mask_kind=kind, window_left=wl, window_right=wr, max_seqlen_q=max(q_lens))
    if padded:
        kw.update(seqstart_k=torch.tensor(k_starts, dtype=torch.int32),
                  seqlen_k=torch.tensor(k_lens, dtype=torch.int32))
    else:
        kw.update(seqstart_k=torch.tensor(k_starts + [mkv], dtype=torch.int32))
    allowed = varlen_allowed(q_lens, k_starts, k_lens, mkv, kind, wl, wr)
    check_grads(q, k, v, allowed, None, 0.25, kw, gen=g)


@pytest.mark.parametrize("shape", [(13,), (1, 13), (7, 1), (2, 1, 1, 13), (1, 3, 7, 13), (2, 3, 7, 13)])
@pytest.mark.parametrize("kind", [0, 2])
def test_cpu_bias_grad(shape, kind):
    g = torch.Generator().manual_seed(len(shape) * 10 + kind)
    B, H, mq, mkv = 2, 3, 7, 13
    q, k, v = rand((B, mq, H, 8), gen=g), rand((B, mkv, H, 8), gen=g), rand((B, mkv, H, 16), gen=g)
    bias = rand(shape, gen=g)
    check_grads(q, k, v, dense_allowed(B, mq, mkv, kind, -1, -1), bias, 0.35, dict(mask_kind=kind), gen=g)


def test_cpu_bias_without_grad():
    g = torch.Generator().manual_seed(3)
    q, k, v = rand((1, 5, 2, 8), gen=g), rand((1, 6, 2, 8), gen=g), rand((1, 6, 2, 8), gen=g)
    bias = rand((1, 2, 5, 6), torch.float32, gen=g)
    out, lse = FWD(q, k, v, bias)
    dq, dk, dv, db = BWD(torch.ones_like(out), q, k, v, out, lse, bias)
    assert db.shape == (0,)
    dq2, _, _, db2 = BWD(torch.ones_like(out), q, k, v, out, lse, bias, bias_requires_grad=True)
    assert torch.equal(dq, dq2) and db2.shape == bias.shape and db2.dtype == torch.float32


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-5), (torch.bfloat16, 2e-2), (torch.float16, 4e-3)])
def test_cpu_low_precision(dtype, atol):
    g = torch.Generator().manual_seed(11)
    B, H, mq, mkv = 2, 2, 17, 19
    q, k, v = (rand(s, dtype, g) for s in ((B, mq, H, 40), (B, mkv, H, 40), (B, mkv, H, 24)))
    bias = rand((H, mq, mkv), torch.float32, g)
    got = check_grads(q, k, v, dense_allowed(B, mq, mkv, 1, -1, -1), bias, 0.2, dict(mask_kind=1), atol=atol,
                      gen=g)
    assert [t.dtype for t in got] == [dtype] * 3 + [torch.float32]


@pytest.mark.parametrize("Hkv", [1, 2])
def test_cpu_gqa_expand(Hkv):
    """An expand()ed K/V gets per-head gradients; their sum is the gradient of the shared head.
    Hkv = 1 (MQA) passes stride-0 views; Hkv = 2 a copy (flatten cannot merge the expanded dims)."""
    g = torch.Generator().manual_seed(5)
    B, mq, mkv, G, K = 1, 9, 11, 3, 16
    q = rand((B, mq, Hkv * G, K), gen=g)
    k0, v0 = rand((B, mkv, Hkv, 1, K), gen=g), rand((B, mkv, Hkv, 1, K), gen=g)
    k, v = (t0.expand(B, mkv, Hkv, G, K).flatten(2, 3) for t0 in (k0, v0))
    assert (k.stride(2) == 0) == (Hkv == 1)
    out, lse = FWD(q, k, v, mask_kind=2, scale=0.3)
    dout = rand(out.shape, gen=g)
    dq, dk, dv, _ = BWD(dout, q, k, v, out, lse, mask_kind=2, scale=0.3)
    assert dk.shape == (B, mkv, Hkv * G, K) and dk.is_contiguous()
    leaves = [t.clone().requires_grad_() for t in (q, k0, v0)]
    kk, vv = (t.expand(B, mkv, Hkv, G, K).flatten(2, 3) for t in leaves[1:])
    want_out, _ = attention(leaves[0], kk, vv, dense_allowed(B, mq, mkv, 2, -1, -1), scale=0.3)
    wq, wk, wv = torch.autograd.grad(want_out, leaves, dout)
    torch.testing.assert_close(dq, wq, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(dk.view(B, mkv, Hkv, G, K).sum(3, keepdim=True), wk, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(dv.view(B, mkv, Hkv, G, K).sum(3, keepdim=True), wv, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("B,H,mq,mkv,bias_shape", [(1, 3, 600, 600, (1, 3, 1, 600)), (1, 2, 1030, 1030, (1030, 1))])
def test_cpu_chunked(B, H, mq, mkv, bias_shape):
    """Problems over the CPU chunk budget (2^20 scores): heads chunked, then rows of one head."""
    g = torch.Generator().manual_seed(mq)
    q, k, v = rand((B, mq, H, 8), torch.float32, g), rand((B, mkv, H, 8), torch.float32, g), \
        rand((B, mkv, H, 8), torch.float32, g)
    bias = rand(bias_shape, torch.float32, g)
    kw = dict(mask_kind=2, dropout_p=0.2, rng_state=rng(77, 3))
    keep = MASK(rng(77, 3), B, H, mq, mkv, 0.2, torch.device("cpu"))
    check_grads(q, k, v, dense_allowed(B, mq, mkv, 2, -1, -1), bias, 0.3, kw, keep, 0.2, atol=2e-5, gen=g)


def test_cpu_empty():
    q, k, v = torch.zeros(2, 0, 3, 8), torch.zeros(2, 5, 3, 8), torch.zeros(2, 5, 3, 4)
    out, lse = FWD(q, k, v)
    dq, dk, dv, _ = BWD(out, q, k, v, out, lse)
    assert dq.shape == q.shape and dk.abs().sum() == 0 and dv.shape == v.shape
    q = torch.randn(1, 3, 2, 8)
    k, v = torch.zeros(1, 0, 2, 8), torch.zeros(1, 0, 2, 4)
    out, lse = FWD(q, k, v)
    assert torch.isinf(lse).all()
    dq, dk, dv, _ = BWD(torch.randn_like(out), q, k, v, out, lse)
    assert dq.abs().sum() == 0 and dk.shape == k.shape


# ---- CPU: dropout ------------------------------------------------------------------------------

def test_dropout_mask_contract():
    m = MASK(rng(123, 7), 2, 3, 17, 33, 0.25, torch.device("cpu"))
    assert m.shape == (2, 3, 17, 33) and m.dtype == torch.bool
    # Element (b, h, i, j) depends on b * H + h only: [2, 3] heads are [1, 6] heads.
    assert torch.equal(m.reshape(1, 6, 17, 33), MASK(rng(123, 7), 1, 6, 17, 33, 0.25, torch.device("cpu")))
    # Rows / keys are absolute: a smaller mask is a corner of a larger one.
    assert torch.equal(m[:, :, :5, :9], MASK(rng(123, 7), 2, 3, 5, 9, 0.25, torch.device("cpu")))
    assert not torch.equal(m, MASK(rng(123, 8), 2, 3, 17, 33, 0.25, torch.device("cpu")))
    assert not torch.equal(m, MASK(rng(124, 7), 2, 3, 17, 33, 0.25, torch.device("cpu")))
    assert MASK(rng(1, 2), 1, 2, 5, 7, 0.0, torch.device("cpu")).all()
    # The seed is 64-bit: its high word matters.
    assert not torch.equal(m, MASK(rng(123 + (1 << 40), 7), 2, 3, 17, 33, 0.25, torch.device("cpu")))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keep_rate(p):
    B, H, M, N = 2, 4, 128, 128
    m = MASK(rng(2024, 1), B, H, M, N, p, torch.device("cpu"))
    n = m.numel()
    rate = m.double().mean().item()
    assert abs(rate - (1 - p)) < 6 * math.sqrt(p * (1 - p) / n)
    # No structure along rows or keys: per-row keep counts stay within bounds too.
    rows = m.double().mean(-1)
    assert (rows - (1 - p)).abs().max() < 6 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("kind,wl,wr", [(0, -1, -1), (2, -1, -1), (3, 2, 1)])
def test_cpu_dropout_dense(kind, wl, wr):
    g = torch.Generator().manual_seed(kind + 40)
    B, H, mq, mkv, p = 2, 3, 9, 14, 0.3
    q, k, v = rand((B, mq, H, 16), gen=g), rand((B, mkv, H, 16), gen=g), rand((B, mkv, H, 8), gen=g)
    bias = rand((1, H, mq, mkv), gen=g)
    keep = MASK(rng(9, 4), B, H, mq, mkv, p, torch.device("cpu"))
    kw = dict(mask_kind=kind, window_left=wl, window_right=wr, dropout_p=p, rng_state=rng(9, 4))
    check_grads(q, k, v, dense_allowed(B, mq, mkv, kind, wl, wr), bias, 0.4, kw, keep, p, gen=g)


def test_cpu_dropout_varlen():
    """Varlen: B = 1 and the mask's rows / keys are the packed rows."""
    g = torch.Generator().manual_seed(41)
    q_lens, k_lens, H, p = [4, 0, 6], [5, 3, 7], 2, 0.4
    mq, mkv = sum(q_lens), sum(k_lens)
    q, k, v = rand((1, mq, H, 8), gen=g), rand((1, mkv, H, 8), gen=g), rand((1, mkv, H, 8), gen=g)
    kw = dict(seqstart_q=torch.tensor([0, 4, 4, 10], dtype=torch.int32),
              seqstart_k=torch.tensor([0, 5, 8, 15], dtype=torch.int32), mask_kind=1, dropout_p=p,
              rng_state=rng(5, 6))
    keep = MASK(rng(5, 6), 1, H, mq, mkv, p, torch.device("cpu"))
    allowed = varlen_allowed(q_lens, [0, 5, 8], k_lens, mkv, 1, -1, -1)
    check_grads(q, k, v, allowed, None, 0.3, kw, keep, p, gen=g)


def test_cpu_dropout_zero_ignores_rng_state():
    q = torch.randn(1, 4, 2, 8, dtype=torch.float64)
    a = FWD(q, q, q)
    b = FWD(q, q, q, dropout_p=0.0, rng_state=rng(1, 1))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# ---- opcheck and fakes -------------------------------------------------------------------------

def op_cases(device):
    g = torch.Generator().manual_seed(0)
    q, k, v = (rand(s, torch.float32, g, device) for s in ((2, 5, 2, 8), (2, 6, 2, 8), (2, 6, 2, 16)))
    if device == "cuda":
        q, k, v = q.half(), k.half(), v.half()
    bias = rand((2, 1, 5, 6), torch.float32, g, device)
    out, lse = FWD(q, k, v, bias, mask_kind=2, dropout_p=0.25, rng_state=rng(3, 4))
    dout = torch.ones_like(out)
    sq = torch.tensor([0, 2, 5], dtype=torch.int32, device=device)
    sk = torch.tensor([0, 6, 12], dtype=torch.int32, device=device)
    qv, kv, vv = q[:1], k.reshape(1, 12, 2, 8), v.reshape(1, 12, 2, 16)
    ov, lv = FWD(qv, kv, vv, seqstart_q=sq, seqstart_k=sk, mask_kind=1)
    return [
        (FWD.default, (q, k, v, bias), dict(mask_kind=2, dropout_p=0.25, rng_state=rng(3, 4))),
        (BWD.default, (dout, q, k, v, out, lse, bias),
         dict(mask_kind=2, dropout_p=0.25, rng_state=rng(3, 4), bias_requires_grad=True)),
        (BWD.default, (dout, q, k, v, out, lse, bias), dict(mask_kind=2, deterministic=True)),
        (BWD.default, (torch.ones_like(ov), qv, kv, vv, ov, lv),
         dict(seqstart_q=sq, seqstart_k=sk, mask_kind=1, max_seqlen_q=3, max_seqlen_k=6)),
        (MASK.default, (rng(3, 4), 2, 2, 5, 6, 0.25, torch.device(device)), {}),
    ]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
def test_opcheck(device):
    for op, args, kwargs in op_cases(device):
        torch.library.opcheck(op, args, kwargs)


# ---- bad inputs --------------------------------------------------------------------------------

def bwd_args():
    q = torch.randn(1, 4, 2, 8)
    out, lse = FWD(q, q, q)
    return [out.clone(), q, q, q, out, lse]


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(dropout_p=1.0, rng_state=rng(1, 2)), ValueError, "dropout_p"),
    (dict(dropout_p=-0.1), ValueError, "dropout_p"),
    (dict(dropout_p=0.5), ValueError, "needs rng_state"),
    (dict(dropout_p=0.5, rng_state=torch.tensor([1, 2], dtype=torch.int32)), TypeError, "rng_state"),
    (dict(dropout_p=0.5, rng_state=torch.tensor([1, 2, 3])), ValueError, "rng_state"),
    (dict(dropout_p=0.5, rng_state=torch.tensor([[1, 2]])), ValueError, "rng_state"),
])
def test_bad_dropout_args(kw, exc, msg):
    q = torch.randn(1, 4, 2, 8)
    with pytest.raises(exc, match=msg):
        FWD(q, q, q, **kw)
    with pytest.raises(exc, match=msg):
        BWD(*bwd_args(), **kw)


def test_bad_bwd_args():
    dout, q, k, v, out, lse = bwd_args()
    with pytest.raises(ValueError, match="fmha_fused_bwd.*'grad_out' must have shape"):
        BWD(dout[:, :3], q, k, v, out, lse)
    with pytest.raises(ValueError, match="'out' must have shape"):
        BWD(dout, q, k, v, out[..., :4], lse)
    with pytest.raises(TypeError, match="grad_out and out must have q's dtype"):
        BWD(dout.double(), q, k, v, out, lse)
    with pytest.raises(ValueError, match="'lse' must have shape"):
        BWD(dout, q, k, v, out, lse[:, :1])
    with pytest.raises(TypeError, match="'lse' must have dtype Float"):
        BWD(dout, q, k, v, out, lse.double())
    with pytest.raises(ValueError, match="bias_requires_grad=True needs a tensor bias"):
        BWD(dout, q, k, v, out, lse, bias_requires_grad=True)
    with pytest.raises(ValueError, match="fmha_fused_bwd: mask_kind"):
        BWD(dout, q, k, v, out, lse, mask_kind=7)
    with pytest.raises(ValueError, match="max_seqlen_k"):
        BWD(dout, q, k, v, out, lse, max_seqlen_k=-2)
    with pytest.raises(ValueError, match="'grad_out' must have stride 1"):
        BWD(dout.transpose(2, 3).contiguous().transpose(2, 3)[..., :2, :], q, k, v, out, lse)


def test_bad_mask_args():
    with pytest.raises(ValueError, match="fmha_dropout_mask.*dropout_p"):
        MASK(rng(1, 2), 1, 1, 2, 2, 1.5, torch.device("cpu"))
    with pytest.raises(ValueError, match="fmha_dropout_mask.*>= 0"):
        MASK(rng(1, 2), 1, -1, 2, 2, 0.5, torch.device("cpu"))
    with pytest.raises(ValueError, match="fmha_dropout_mask.*rng_state"):
        MASK(torch.tensor([1]), 1, 1, 2, 2, 0.5, torch.device("cpu"))


def test_paged_dropout_rejected():
    q, k = torch.zeros(1, 3, 2, 8), torch.zeros(1, 8, 2, 8)
    with pytest.raises(ValueError, match="dropout.*paged"):
        FWD(q, k, k, seqstart_q=torch.tensor([0, 3], dtype=torch.int32),
            seqstart_k=torch.tensor([0], dtype=torch.int32), seqlen_k=torch.tensor([5], dtype=torch.int32),
            block_tables=torch.tensor([[0, 1]], dtype=torch.int32), page_size=4, dropout_p=0.1, rng_state=rng(1, 2))


# ---- CUDA: the fused backward and the GPU general path against the CPU float64 result ----------

def gpu_vs_cpu(q, k, v, bias=None, dtype=torch.bfloat16, deterministic=False, bias_requires_grad=False, allowed=None,
               **kw):
    """Forward + backward on the GPU in `dtype`, and on the CPU in float64 from the same rounded
    inputs (the same rng_state). Returns (gpu grads, cpu grads, gpu out, cpu out, slack): slack is
    the D-term slack of each gradient (d_slack) given the allowed mask, else Nones."""
    g = torch.Generator().manual_seed(99)
    qd, kd, vd = (t.to(dtype) for t in (q, k, v))
    dev = lambda t: t.cuda() if isinstance(t, torch.Tensor) and t.dtype != torch.int64 else t  # noqa: E731
    kwd = {n: dev(t) for n, t in kw.items()}
    bd = bias.cuda() if bias is not None else None
    out, lse = FWD(qd.cuda(), kd.cuda(), vd.cuda(), bd, **kwd)
    dout = rand(out.shape, dtype, g)
    got = BWD(dout.cuda(), qd.cuda(), kd.cuda(), vd.cuda(), out, lse, bd, deterministic=deterministic,
              bias_requires_grad=bias_requires_grad, **kwd)
    q64, k64, v64 = (t.double() for t in (qd, kd, vd))
    out64, lse64 = FWD(q64, k64, v64, bias, **kw)
    want = BWD(dout.double(), q64, k64, v64, out64, lse64, bias, bias_requires_grad=bias_requires_grad, **kw)
    slack = [None] * 4
    if allowed is not None:
        slack = d_slack(q64, k64, bias, allowed, kw.get("scale"), dout, out, out64, bias_requires_grad)
    return got, want, out, out64, slack


def d_slack(q, k, bias, allowed, scale, dout, out, out64, dbias=False):
    """tolerance.d_term_slack of (dq, dk, dv, dbias) for the attention of `allowed` (+ bias)."""
    leaves = [q.detach().double().requires_grad_(), k.detach().double().requires_grad_()]
    dense = torch.zeros(allowed.shape, dtype=torch.float64).masked_fill(~allowed, -math.inf)
    if bias is not None:
        b = bias.detach().double().cpu().requires_grad_(dbias)
        leaves += [b] if dbias else []
        dense = dense + b
    sq, sk, *sb = d_term_slack(lse_f64(leaves[0], leaves[1], dense, scale), leaves, dout, out, out64)
    return [sq, sk, None, sb[0] if sb else None]


TOL = {torch.float32: 1e-4}  # fp16 / bf16: tolerance.py


def assert_grads_close(got, want, dtype, slack=(None,) * 4, names=("dq", "dk", "dv", "dbias")):
    for name, g, w, sl in zip(names, got, want, slack):
        if w.numel() == 0:
            continue
        assert g.shape == w.shape and g.dtype == (dtype if name != "dbias" else g.dtype), name
        if dtype in GRAD_TOL:
            assert_grad_close(g, w, dtype, sl, what=name)
            continue
        err = (g.cpu().double() - w).abs().max().item()
        assert err <= TOL[dtype] * max(w.abs().max().item(), 1e-3), f"{name}: max error {err}"


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,Kv", [(64, 64), (128, 128), (256, 256), (40, 40), (96, 96), (64, 128)])
@pytest.mark.parametrize("kind,wl,wr", MASKS)
def test_cuda_dense(dtype, K, Kv, kind, wl, wr):
    g = torch.Generator().manual_seed(K + kind)
    B, H, mq, mkv = 2, 3, 150, 211
    q, k, v = rand((B, mq, H, K), gen=g), rand((B, mkv, H, K), gen=g), rand((B, mkv, H, Kv), gen=g)
    got, want, _, _, slack = gpu_vs_cpu(q, k, v, None, dtype, allowed=dense_allowed(B, mq, mkv, kind, wl, wr),
                                        mask_kind=kind, window_left=wl, window_right=wr, scale=K ** -0.5)
    assert_grads_close(got, want, dtype, slack)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind,wl,wr", [(0, -1, -1), (1, -1, -1), (2, -1, -1), (3, 17, 5)])
@pytest.mark.parametrize("padded", [False, True])
def test_cuda_varlen(dtype, kind, wl, wr, padded):
    g = torch.Generator().manual_seed(kind)
    q_lens, k_lens = [37, 0, 129, 1, 64], [50, 3, 0, 200, 64]
    if padded:
        k_starts, mkv = [256 * s for s in range(5)], 256 * 5
        ks = dict(seqstart_k=torch.tensor(k_starts, dtype=torch.int32),
                  seqlen_k=torch.tensor(k_lens, dtype=torch.int32))
    else:
        k_starts, mkv = [sum(k_lens[:s]) for s in range(5)], sum(k_lens)
        ks = dict(seqstart_k=torch.tensor(k_starts + [mkv], dtype=torch.int32))
    H, mq = 4, sum(q_lens)
    q, k, v = rand((1, mq, H, 128), gen=g), rand((1, mkv, H, 128), gen=g), rand((1, mkv, H, 128), gen=g)
    sq = torch.tensor([sum(q_lens[:s]) for s in range(6)], dtype=torch.int32)
    allowed = varlen_allowed(q_lens, k_starts, k_lens, mkv, kind, wl, wr)
    got, want, _, _, slack = gpu_vs_cpu(q, k, v, None, dtype, allowed=allowed, seqstart_q=sq, mask_kind=kind,
                                        window_left=wl, window_right=wr, scale=0.088, max_seqlen_q=max(q_lens), **ks)
    assert_grads_close(got, want, dtype, slack)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", [0, 2])
def test_cuda_dropout(dtype, kind):
    g = torch.Generator().manual_seed(kind)
    B, H, mq, mkv, p = 2, 4, 173, 190, 0.2
    q, k, v = rand((B, mq, H, 64), gen=g), rand((B, mkv, H, 64), gen=g), rand((B, mkv, H, 64), gen=g)
    rs = rng(31337, 12)
    cpu_mask = MASK(rs, B, H, mq, mkv, p, torch.device("cpu"))
    assert torch.equal(MASK(rs, B, H, mq, mkv, p, torch.device("cuda")).cpu(), cpu_mask)
    got, want, out, out64, slack = gpu_vs_cpu(q, k, v, None, dtype, allowed=dense_allowed(B, mq, mkv, kind, -1, -1),
                                              mask_kind=kind, scale=0.125, dropout_p=p, rng_state=rs)
    assert_attention_close(out, out64, dtype)
    assert_grads_close(got, want, dtype, slack)


@needs_cuda
@pytest.mark.parametrize("dtype,K,Kv", [(torch.float32, 64, 64), (torch.float32, 40, 300), (torch.bfloat16, 320, 320)])
@pytest.mark.parametrize("p", [0.0, 0.2])
def test_cuda_exact_path_training(monkeypatch, dtype, K, Kv, p):
    # float32 and head dims over 256: forward and backward both on the GPU's exact path (no fused
    # kernel takes them), the same dropout mask in both, against the CPU in float64
    monkeypatch.delenv("MSLK_FMHA_KERNEL", raising=False)
    g = torch.Generator().manual_seed(K + Kv)
    B, H, mq, mkv = 2, 2, 70, 90
    q, k, v = rand((B, mq, H, K), gen=g), rand((B, mkv, H, K), gen=g), rand((B, mkv, H, Kv), gen=g)
    kw = dict(dropout_p=p, rng_state=rng(11, 3)) if p else {}
    got, want, out, out64, slack = gpu_vs_cpu(q, k, v, None, dtype, allowed=dense_allowed(B, mq, mkv, 2, -1, -1),
                                              mask_kind=2, scale=0.1, **kw)
    if dtype == torch.float32:
        assert (out.cpu().double() - out64).abs().max() <= 1e-4 * out64.abs().max()
    else:
        assert_attention_close(out, out64, dtype)
    assert_grads_close(got, want, dtype, slack)


@needs_cuda
def test_cuda_dropout_varlen():
    g = torch.Generator().manual_seed(8)
    q_lens, k_lens, p = [70, 0, 33], [64, 9, 100], 0.3
    mq, mkv = sum(q_lens), sum(k_lens)
    q, k, v = rand((1, mq, 2, 64), gen=g), rand((1, mkv, 2, 64), gen=g), rand((1, mkv, 2, 64), gen=g)
    kw = dict(seqstart_q=torch.tensor([0, 70, 70, 103], dtype=torch.int32),
              seqstart_k=torch.tensor([0, 64, 73, 173], dtype=torch.int32), mask_kind=2, dropout_p=p,
              rng_state=rng(4, 5), scale=0.125)
    allowed = varlen_allowed(q_lens, [0, 64, 73], k_lens, mkv, 2, -1, -1)
    got, want, _, _, slack = gpu_vs_cpu(q, k, v, None, torch.bfloat16, allowed=allowed, **kw)
    assert_grads_close(got, want, torch.bfloat16, slack)


@needs_cuda
@pytest.mark.parametrize("dropout_p", [0.0, 0.1])
def test_cuda_deterministic(dropout_p):
    g = torch.Generator().manual_seed(1)
    B, H, M, K = 2, 8, 1000, 128
    q, k, v = (rand((B, M, H, K), torch.bfloat16, g, "cuda") for _ in range(3))
    kw = dict(mask_kind=1, scale=K ** -0.5, dropout_p=dropout_p, rng_state=rng(1, 2))
    out, lse = FWD(q, k, v, **kw)
    dout = rand(out.shape, torch.bfloat16, g, "cuda")
    a = BWD(dout, q, k, v, out, lse, deterministic=True, **kw)
    b = BWD(dout, q, k, v, out, lse, deterministic=True, **kw)
    for x, y in zip(a[:3], b[:3]):
        assert torch.equal(x, y)


@needs_cuda
@pytest.mark.parametrize("Hkv", [1, 2])
def test_cuda_gqa_expand(Hkv):
    g = torch.Generator().manual_seed(2)
    B, mq, mkv, G, K = 2, 129, 257, 4, 128
    q = rand((B, mq, Hkv * G, K), gen=g)
    k0, v0 = rand((B, mkv, Hkv, 1, K), gen=g), rand((B, mkv, Hkv, 1, K), gen=g)
    k, v = (t.expand(B, mkv, Hkv, G, K).flatten(2, 3) for t in (k0, v0))
    qd, kd, vd = (t.to(torch.bfloat16).cuda() for t in (q, k0, v0))
    kd, vd = (t.expand(B, mkv, Hkv, G, K).flatten(2, 3) for t in (kd, vd))
    out, lse = FWD(qd, kd, vd, mask_kind=2, scale=0.09)
    dout = rand(out.shape, torch.bfloat16, g)
    got = BWD(dout.cuda(), qd, kd, vd, out, lse, mask_kind=2, scale=0.09)
    assert got[1].shape == (B, mkv, Hkv * G, K)
    q64, k64, v64 = (t.to(torch.bfloat16).double() for t in (q, k, v))
    o64, l64 = FWD(q64, k64, v64, mask_kind=2, scale=0.09)
    want = BWD(dout.double(), q64, k64, v64, o64, l64, mask_kind=2, scale=0.09)
    slack = d_slack(q64, k64, None, dense_allowed(B, mq, mkv, 2, -1, -1), 0.09, dout, out, o64)
    assert_grads_close(got, want, torch.bfloat16, slack)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_general_path(dtype):
    """float32 inputs, and dbias (bias_requires_grad), run the reference backward on the GPU."""
    g = torch.Generator().manual_seed(3)
    B, H, mq, mkv = 2, 3, 77, 90
    q, k, v = rand((B, mq, H, 64), gen=g), rand((B, mkv, H, 64), gen=g), rand((B, mkv, H, 32), gen=g)
    bias = rand((1, H, mq, mkv), torch.float32, g)
    if dtype == torch.float32:
        # The fused forward takes fp16/bf16 only: build out / lse with the CPU op, then move them.
        out, lse = FWD(q.float(), k.float(), v.float(), bias.float(), mask_kind=1, scale=0.1)
        dout = rand(out.shape, torch.float32, g)
        got = BWD(*(t.cuda() for t in (dout, q.float(), k.float(), v.float(), out, lse, bias)), mask_kind=1,
                  scale=0.1, bias_requires_grad=True)
        want = BWD(dout.double(), q, k, v, out.double(), lse.double(), bias.double(), mask_kind=1, scale=0.1,
                   bias_requires_grad=True)
        slack = (None,) * 4
    else:
        got, want, _, _, slack = gpu_vs_cpu(q, k, v, bias, dtype, bias_requires_grad=True,
                                            allowed=dense_allowed(B, mq, mkv, 1, -1, -1), mask_kind=1, scale=0.1)
    assert_grads_close(got, want, dtype, slack)
    assert got[3].shape == bias.shape and got[3].dtype == torch.float32


@needs_cuda
@pytest.mark.parametrize("bias_requires_grad", [False, True])
def test_cuda_path_taken(bias_requires_grad):
    """fp16 without dbias runs the fused kernels (fmha_bwd_* launches); dbias runs the reference."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (rand((2, 100, 2, 64), torch.float16, g, "cuda") for _ in range(3))
    bias = rand((2, 1, 100, 100), torch.float16, g, "cuda")
    out, lse = FWD(q, k, v, bias, mask_kind=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        BWD(torch.ones_like(out), q, k, v, out, lse, bias, mask_kind=1, bias_requires_grad=bias_requires_grad)
        torch.cuda.synchronize()
    fused = any("fmha_bwd" in e.name for e in prof.events())
    assert fused != bias_requires_grad


@needs_cuda
def test_cuda_rng_state_on_gpu_rejected():
    q = torch.randn(1, 4, 2, 8, device="cuda", dtype=torch.float16)
    bad = rng(1, 2).cuda()
    with pytest.raises(ValueError, match="'rng_state' must be on the CPU"):
        FWD(q, q, q, dropout_p=0.5, rng_state=bad)
    out, lse = FWD(q, q, q)
    with pytest.raises(ValueError, match="'rng_state' must be on the CPU"):
        BWD(out, q, q, q, out, lse, dropout_p=0.5, rng_state=bad)
    with pytest.raises(ValueError, match="fmha_dropout_mask.*'rng_state' must be on the CPU"):
        MASK(bad, 1, 1, 2, 2, 0.5, torch.device("cuda"))


@needs_cuda
def test_cuda_general_path_chunked():
    """A float32 problem over the GPU chunk budget (2^25 scores): rows of one head in chunks, with
    dropout and dbias, against the CPU reference (which chunks differently)."""
    g = torch.Generator().manual_seed(6)
    M, K, p = 6000, 32, 0.1
    q, k, v = (rand((1, M, 1, K), torch.float32, g) for _ in range(3))
    bias = rand((M, 1), torch.float32, g)
    kw = dict(mask_kind=1, scale=0.2, dropout_p=p, rng_state=rng(8, 9), bias_requires_grad=True)
    out, lse = FWD(q, k, v, bias, **{n: x for n, x in kw.items() if n != "bias_requires_grad"})
    dout = rand(out.shape, torch.float32, g)
    want = BWD(dout, q, k, v, out, lse, bias, **kw)
    got = BWD(*(t.cuda() for t in (dout, q, k, v, out, lse, bias)), **kw)
    for name, x, w in zip(("dq", "dk", "dv", "dbias"), got, want):
        err = (x.cpu() - w).abs().max().item()
        # dbias sums dS over the keys, which is 0 up to rounding (sum_j P_ij (dP_ij - D_i) = 0): its error
        # is measured against the scale of the summed terms, not of the (vanishing) result.
        floor = 0.1 if name == "dbias" else 1e-3
        assert err <= 1e-4 * max(w.abs().max().item(), floor), f"{name}: max error {err}"
