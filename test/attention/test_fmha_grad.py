"""Attention training on the CPU backend: autograd through memory_efficient_attention (every mask
class a backward takes, BMK/BMHK/BMGHK, GQA through expand, tensor-bias gradients), gradcheck,
dropout, the manual forward/backward API, partial attention with the LSE gradient, backward
operator classes and dispatch, torch.compile of a training step. Oracle: float64 autograd of a
plain softmax attention (oracle.attention_f64) with the mask materialized."""

import math

import pytest
import torch

import mslk  # noqa: F401
from mslk.attention import fmha
from mslk.attention.fmha import _backward, cute_hopper, cutlass, dispatch, flash, flash3, reference, triton_splitk
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha.common import Context, Inputs
from test.attention import oracle
from test.attention.tolerance import GRAD_TOL, assert_attention_close, assert_grad_close, d_term_slack, lse_f64

HAS_BWD = hasattr(torch.ops.mslk, "fmha_fused_bwd")
pytestmark = pytest.mark.skipif(not HAS_BWD, reason="mslk::fmha_fused_bwd is not built")

# Masks of the backward (no paged K/V): (name, factory(Mq_or_lens...) -> bias, varlen q/k lengths)
VARLEN_Q, VARLEN_K = [3, 0, 7, 1], [5, 2, 7, 4]  # an empty query block and unequal lengths


def _masks():
    qs, ks = VARLEN_Q, VARLEN_K
    same = [3, 1, 7, 2]
    return {
        "none": None,
        "causal": ab.LowerTriangularMask(),
        "causal_br": ab.LowerTriangularFromBottomRightMask(),
        "causal_local_br": ab.LowerTriangularFromBottomRightLocalAttentionMask(3),
        "local_br": ab.LocalAttentionFromBottomRightMask(2, 1),
        "block": ab.BlockDiagonalMask.from_seqlens(qs, ks),
        "block_causal": ab.BlockDiagonalCausalMask.from_seqlens(same),
        "block_causal_br": ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens(qs, ks),
        "block_causal_local": ab.BlockDiagonalCausalMask.from_seqlens(same).make_local_attention(2),
        "block_causal_local_br": ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens(
            qs, ks).make_local_attention(3),
        "padded": ab.BlockDiagonalPaddedKeysMask.from_seqlens(qs, 8, [5, 2, 7, 0]),
        "padded_causal_offset": ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(qs, 8, [5, 2, 7, 1]),
        "gappy": ab.BlockDiagonalGappyKeysMask.from_seqlens([2, 3], [1, 9, 20], [5, 4]),
        "tensor": "tensor",
        "causal_tensor": "causal_tensor",
    }


MASKS = list(_masks())


def _lens(bias, mq, mk):
    if isinstance(bias, ab.VARLEN_BIASES):
        return 1, bias.q_seqinfo.total, bias._kv_total()
    return 2, mq, mk


def _make(layout, B, mq, mk, K, Kv, dtype, gen, heads=(2, 3)):
    """Leaves (q, k_base, v_base) and the q/k/v handed to the API: BMGHK with K/V expanded along
    H (GQA), BMHK, or BMK."""
    G, H = heads
    f64 = torch.float64

    def r(*s):
        return torch.randn(*s, generator=gen, dtype=f64).to(dtype).requires_grad_()

    if layout == "BMGHK":
        q, kb, vb = r(B, mq, G, H, K), r(B, mk, G, 1, K), r(B, mk, G, 1, Kv)
        return (q, kb, vb), (q, kb.expand(B, mk, G, H, K), vb.expand(B, mk, G, H, Kv))
    if layout == "BMK":
        q, k, v = r(B, mq, K), r(B, mk, K), r(B, mk, Kv)
    else:
        q, k, v = r(B, mq, G * H, K), r(B, mk, G * H, K), r(B, mk, G * H, Kv)
    return (q, k, v), (q, k, v)


def _to4(x):
    if x.ndim == 3:
        return x.unsqueeze(2)
    if x.ndim == 5:
        return x.reshape(*x.shape[:2], -1, x.shape[-1])
    return x


def _dense(bias, q, k):
    """The additive float64 bias of `bias` for the oracle, broadcastable to [B, H, Mq, Mkv]."""
    if bias is None:
        return None
    mq, mk = q.shape[1], k.shape[1]

    def tensor(t):
        t = t.double()
        if q.ndim == 3 and t.ndim == 3:
            return t.unsqueeze(1)
        return t.reshape(t.shape[0], -1, mq, mk) if t.ndim == 5 else t

    if isinstance(bias, torch.Tensor):
        return tensor(bias)
    if isinstance(bias, ab.LowerTriangularMaskWithTensorBias):
        return ab.LowerTriangularMask().materialize((mq, mk), torch.float64) + tensor(bias._bias)
    return bias.materialize((mq, mk), torch.float64)


def _oracle_out(q, k, v, bias, scale=None):
    out, _ = oracle.attention_f64(_to4(q), _to4(k), _to4(v), _dense(bias, q, k), scale)
    return out.reshape(*q.shape[:-1], v.shape[-1])


def _bias_of(name, bias, B, mq, mk, layout, dtype, gen, heads=(2, 3)):
    if name not in ("tensor", "causal_tensor"):
        return bias, None
    G, H = heads
    if layout == "BMGHK":
        shape = (1, G, H, mq, mk)
    elif layout == "BMK":
        shape = (B, mq, mk)
    else:
        shape = (1, G * H, mq, mk)
    t = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
    return (t if name == "tensor" else ab.LowerTriangularMaskWithTensorBias(t)), t


def _close(got, want, tol):
    """|got - want| <= tol * (max|want| + 1e-3): tolerance relative to the gradient's scale."""
    scale = want.abs().max().item() + 1e-3
    err = (got.double() - want).abs().max().item() if got.numel() else 0.0
    assert err <= tol * scale, (err, scale)


def check_grads(name, layout, dtype, mq=7, mk=9, K=8, Kv=8, scale=None, op=None, device="cpu", tol=None, seed=0,
                bias=None):
    """Gradients of memory_efficient_attention against float64 autograd; the mask is _masks()[name],
    or `bias` (a mask object, not a tensor) where given."""
    gen = torch.Generator().manual_seed(seed)
    bias = _masks()[name] if bias is None else bias
    B, mq, mk = _lens(bias, mq, mk)
    leaves, (q, k, v) = _make(layout, B, mq, mk, K, Kv, dtype, gen)
    bias, bt = _bias_of(name, bias, B, mq, mk, layout, dtype, gen)
    if device != "cpu":
        leaves = [x.detach().to(device).requires_grad_() for x in leaves]
        if layout == "BMGHK":
            q, kb, vb = leaves
            k, v = kb.expand(B, mk, *q.shape[2:4], K), vb.expand(B, mk, *q.shape[2:4], Kv)
        else:
            q, k, v = leaves
        if bt is not None:
            bt = bt.detach().to(device).requires_grad_()
            bias = bt if name == "tensor" else ab.LowerTriangularMaskWithTensorBias(bt)
    wrt = [*leaves] + ([bt] if bt is not None else [])
    out = fmha.memory_efficient_attention(q, k, v, bias, scale=scale, op=op)
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.dtype).to(device)
    got = torch.autograd.grad(out, wrt, g)
    cpu = [x.detach().cpu().double().requires_grad_() for x in wrt]
    if layout == "BMGHK":
        rq, rkb, rvb = cpu[:3]
        rk, rv = rkb.expand(*rkb.shape[:3], rq.shape[3], K), rvb.expand(*rvb.shape[:3], rq.shape[3], Kv)
    else:
        rq, rk, rv = cpu[:3]
    rbias = bias
    if bt is not None:
        rbias = cpu[3] if name == "tensor" else ab.LowerTriangularMaskWithTensorBias(cpu[3])
    ref = _oracle_out(rq, rk, rv, rbias, scale)
    want = torch.autograd.grad(ref, cpu, g.cpu().double())
    for a, x in zip(got, wrt):
        assert a.shape == x.shape and a.dtype == x.dtype
    if tol is None and dtype in GRAD_TOL:  # fp16 / bf16: per-row bounds (tolerance.py)
        assert_attention_close(out, ref, dtype)
        lse = lse_f64(_to4(rq), _to4(rk), _dense(rbias, rq, rk), scale)
        slack = d_term_slack(lse, cpu, _to4(g), _to4(out), _to4(ref))
        for name, a, w, sl in zip(("dq", "dk", "dv", "dbias"), got, want, slack):
            assert_grad_close(a, w, dtype, sl, what=name)
        return got
    tol = tol or {torch.float64: 1e-9, torch.float32: 1e-4}[dtype]
    _close(out.detach().cpu(), ref.detach(), tol)
    for a, w in zip(got, want):
        _close(a.cpu(), w, tol)
    return got


# --- CPU: gradients against float64 autograd ---------------------------------------------------

@pytest.mark.parametrize("name", MASKS)
@pytest.mark.parametrize("layout", ["BMHK", "BMGHK", "BMK"])
def test_grads_match_f64_autograd(name, layout):
    check_grads(name, layout, torch.float32, scale=0.4 if name == "causal" else None)


@pytest.mark.parametrize("mq,mk", [(1, 1), (1, 7), (7, 1), (127, 127), (7, 127)])
@pytest.mark.parametrize("name", ["none", "causal", "causal_br", "local_br", "tensor"])
def test_grads_lengths(mq, mk, name):
    check_grads(name, "BMHK", torch.float32, mq=mq, mk=mk)


def test_grads_float64_and_different_value_dim():
    check_grads("block_causal_br", "BMGHK", torch.float64, K=5, Kv=3)
    check_grads("causal_tensor", "BMHK", torch.float64, K=4, Kv=6)


def test_tensor_bias_broadcast_shapes():
    gen = torch.Generator().manual_seed(1)
    (q, k, v), _ = _make("BMHK", 2, 5, 6, 8, 8, torch.float64, gen)
    for shape in [(5, 6), (1, 1, 5, 6), (2, 1, 5, 6), (6, 5, 6), (2, 6, 5, 6)]:
        b = torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)
        out = fmha.memory_efficient_attention(q, k, v, b)
        gq, gb = torch.autograd.grad(out.sum(), (q, b))
        ref = _oracle_out(q, k, v, b)
        rq, rb = torch.autograd.grad(ref.sum(), (q, b))
        assert gb.shape == b.shape
        _close(gq, rq, 1e-9)
        _close(gb, rb, 1e-9)
    # a bias that does not require grad gets none; q still does
    b = torch.randn(2, 6, 5, 6, dtype=torch.float64)
    (gq,) = torch.autograd.grad(fmha.memory_efficient_attention(q, k, v, b).sum(), (q,))
    assert gq.shape == q.shape


def test_gradcheck_small_float64():
    gen = torch.Generator().manual_seed(2)
    (q, kb, vb), _ = _make("BMGHK", 1, 4, 5, 3, 3, torch.float64, gen, heads=(2, 2))

    def f(q, kb, vb):
        return fmha.memory_efficient_attention(q, kb.expand(1, 5, 2, 2, 3), vb.expand(1, 5, 2, 2, 3),
                                               ab.LowerTriangularFromBottomRightMask())

    assert torch.autograd.gradcheck(f, (q, kb, vb))
    m = ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([2, 0, 3], [3, 1, 4]).make_local_attention(2)
    q, k, v = (torch.randn(1, n, 2, 3, dtype=torch.float64, generator=gen, requires_grad=True) for n in (5, 8, 8))
    b = torch.randn(2, 5, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: fmha.memory_efficient_attention(q, k, v, m, scale=0.7),
                                    (q, k, v))
    assert torch.autograd.gradcheck(lambda q, k, v, b: fmha.memory_efficient_attention(q[:, :4], k, v, b[:, :4]),
                                    (q, k, v, b))


# --- dropout -------------------------------------------------------------------------------------

def _drop_qkv(seed=3, B=2, M=16, N=24, H=2, K=8, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, n, H, K, generator=gen, dtype=dtype, requires_grad=True) for n in (M, N, N)]


def test_dropout_mask_rate_and_determinism():
    p = 0.3
    rng = torch.tensor([123456789, 42], dtype=torch.int64)
    m = torch.ops.mslk.fmha_dropout_mask(rng, 2, 3, 64, 96, p, torch.device("cpu"))
    assert m.dtype == torch.bool and m.shape == (2, 3, 64, 96)
    n = m.numel()
    assert abs(m.double().mean().item() - (1 - p)) <= 5 * math.sqrt(p * (1 - p) / n)
    assert torch.equal(m, torch.ops.mslk.fmha_dropout_mask(rng, 2, 3, 64, 96, p, torch.device("cpu")))
    other = torch.ops.mslk.fmha_dropout_mask(rng + 1, 2, 3, 64, 96, p, torch.device("cpu"))
    assert not torch.equal(m, other)


def test_dropout_forward_backward_use_the_same_mask():
    """Output and gradients equal float64 math with the keep mask of fmha_dropout_mask for the
    rng_state the forward drew (torch's CPU generator, reproducible under manual_seed)."""
    p = 0.25
    q, k, v = _drop_qkv()
    bias = ab.LowerTriangularFromBottomRightMask()
    torch.manual_seed(7)
    out = fmha.memory_efficient_attention(q, k, v, bias, p=p)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    torch.manual_seed(7)
    rng = _backward.draw_rng_state()
    B, M, H, _ = q.shape
    N = k.shape[1]
    keep = torch.ops.mslk.fmha_dropout_mask(rng, B, H, M, N, p, torch.device("cpu")).double()
    s = torch.einsum("bmhk,bnhk->bhmn", q, k) * q.shape[-1] ** -0.5 + bias.materialize((M, N), torch.float64)
    ref = torch.einsum("bhmn,bnhk->bmhk", torch.softmax(s, -1) * keep / (1 - p), v)
    want = torch.autograd.grad(ref, (q, k, v), g)
    _close(out.detach(), ref.detach(), 1e-9)
    for a, w in zip(got, want):
        _close(a, w, 1e-9)


def test_dropout_same_seed_same_result_and_unbiased():
    q, k, v = _drop_qkv(B=1, M=4, N=8, H=1, K=4)

    def run(seed, p=0.5):
        torch.manual_seed(seed)
        out = fmha.memory_efficient_attention(q, k, v, p=p)
        return out.detach(), torch.autograd.grad(out.sum(), (q, k, v))

    o1, g1 = run(11)
    o2, g2 = run(11)
    o3, _ = run(12)
    assert torch.equal(o1, o2) and all(torch.equal(a, b) for a, b in zip(g1, g2))
    assert not torch.equal(o1, o3)
    # E[dropout(P) / (1 - p)] = P: the mean over seeds approaches the undropped output
    with torch.no_grad():
        plain = fmha.memory_efficient_attention(q, k, v)
        outs = torch.stack([fmha.memory_efficient_attention(q, k, v, p=0.5) for _ in range(400)])
    err = (outs.mean(0) - plain).abs().max().item()
    assert err <= 5 * outs.std(0).max().item() / math.sqrt(400)


def test_dropout_rejected_where_the_spec_rejects_it():
    q, k, v = _drop_qkv(M=4, N=4)
    with pytest.raises(NotImplementedError, match="dropout"):
        fmha.memory_efficient_attention_forward_requires_grad(q, k, v, p=0.1)
    with pytest.raises(NotImplementedError, match="dropout"):
        fmha.memory_efficient_attention_backward(q, q, q[:, 0, :, 0], q, k, v, p=0.1)
    with pytest.raises(NotImplementedError, match="dropout"):
        fmha.memory_efficient_attention_partial(q, k, v, p=0.1, _allow_backward=True)
    with pytest.raises(ValueError, match="dropout > 0.0"):
        fmha.memory_efficient_attention(q, k, v, p=0.1, op=(flash3.FwOp, None))
    assert not flash3.FwOp.SUPPORTS_DROPOUT and not flash3.BwOp.SUPPORTS_DROPOUT
    for op in (cutlass.FwOp, cutlass.BwOp, flash.FwOp, flash.BwOp, reference.FwOp, reference.BwOp):
        assert op.SUPPORTS_DROPOUT, op


# --- manual forward / backward, partial ----------------------------------------------------------

@pytest.mark.parametrize("name", ["causal", "block_causal_br", "tensor"])
def test_manual_backward_matches_autograd(name):
    gen = torch.Generator().manual_seed(4)
    bias = _masks()[name]
    B, mq, mk = _lens(bias, 6, 9)
    _, (q, k, v) = _make("BMHK", B, mq, mk, 8, 8, torch.float64, gen)
    bias, _ = _bias_of(name, bias, B, mq, mk, "BMHK", torch.float64, gen)
    with torch.no_grad():
        out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias)
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    got = fmha.memory_efficient_attention_backward(g, out, lse, q, k, v, bias)
    want = torch.autograd.grad(fmha.memory_efficient_attention(q, k, v, bias), (q, k, v), g)
    for a, w in zip(got, want):
        assert a.shape == w.shape
        _close(a, w, 1e-12)
    # the padded variable-length LSE (cutlass.FwOp's layout) is accepted as well
    if isinstance(bias, ab.VARLEN_BIASES):
        qi = bias.q_seqinfo
        padded = cutlass._packed_to_padded_lse(lse, qi.seqstart_py, qi.max_seqlen)
        assert padded.shape[0] == len(qi.seqstart_py) - 1
        torch.testing.assert_close(_backward.packed_lse(padded, bias), lse)
        got2 = fmha.memory_efficient_attention_backward(g, out, padded, q, k, v, bias, op=reference.BwOp)
        for a, b in zip(got, got2):
            torch.testing.assert_close(a, b)


def test_manual_backward_errors():
    _, (q, k, v) = _make("BMHK", 1, 4, 5, 8, 8, torch.float64, torch.Generator().manual_seed(0))
    q, k, v = q.detach(), k.detach(), v.detach()
    out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v)
    with pytest.raises(ValueError, match="grad must have the output shape"):
        fmha.memory_efficient_attention_backward(out[:, :2], out, lse, q, k, v)
    with pytest.raises(ValueError, match="output must have the output shape"):
        fmha.memory_efficient_attention_backward(out, out[..., :4], lse, q, k, v)
    with pytest.raises(ValueError, match="backward operator class"):
        fmha.memory_efficient_attention_backward(out, out, lse, q, k, v, op=reference.FwOp)
    with pytest.raises(ValueError, match="fa2B"):
        fmha.memory_efficient_attention_backward(out, out, lse, q, k, v, op=(None, flash.BwOp))
    with pytest.raises(ValueError, match="op\\[1\\]"):
        fmha.memory_efficient_attention(q.requires_grad_(), k, v, op=(reference.FwOp, reference.FwOp))
    with pytest.raises(ValueError, match="Key and value"):
        fmha.memory_efficient_attention_backward(out, out, lse, q, k, v[:, :3])


def test_partial_backward_with_lse_gradient():
    """(out, lse) of a partial shard are both differentiable (the LSE gradient is folded into the
    backward op); gradcheck in float64 on a masked, varlen and a tensor-bias problem."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, n, 2, 3, dtype=torch.float64, generator=gen, requires_grad=True) for n in (5, 6, 6))
    m = ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([2, 3], [2, 4])

    def f(q, k, v, bias):
        return fmha.memory_efficient_attention_partial(q, k, v, bias, _allow_backward=True)

    assert torch.autograd.gradcheck(lambda q, k, v: f(q, k, v, m), (q, k, v))
    assert torch.autograd.gradcheck(lambda q, k, v: f(q, k, v, ab.LowerTriangularMask()), (q, k, v))
    b = torch.randn(2, 5, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, b: f(q, k, v, b), (q, b))
    with pytest.raises(ValueError, match="forward-only"):
        fmha.memory_efficient_attention_partial(q, k, v)


def test_partial_lse_only_gradient():
    """A loss on a partial shard's LSE alone (its output unused): the backward gets no output
    gradient and still returns the LSE's share, d lse / dq = scale P K, d lse / dv = 0."""
    gen = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(2, n, 2, 4, dtype=torch.float64, generator=gen, requires_grad=True) for n in (5, 7, 7))
    w = torch.randn(2, 2, 5, dtype=torch.float64, generator=gen)
    _, lse = fmha.memory_efficient_attention_partial(q, k, v, ab.LowerTriangularFromBottomRightMask(),
                                                     _allow_backward=True)
    dq, dk, dv = torch.autograd.grad((lse * w).sum(), (q, k, v))
    qr, kr = (x.detach().clone().requires_grad_() for x in (q, k))
    s = torch.einsum("bmhk,bnhk->bhmn", qr, kr) * 4 ** -0.5
    s = s.masked_fill(torch.ones(5, 7, dtype=torch.bool).tril(7 - 5).logical_not(), -math.inf)
    rq, rk = torch.autograd.grad((torch.logsumexp(s, -1) * w).sum(), (qr, kr))
    torch.testing.assert_close(dq, rq)
    torch.testing.assert_close(dk, rk)
    assert torch.equal(dv, torch.zeros_like(v))


# --- operator classes and dispatch ---------------------------------------------------------------

def test_bw_class_availability_and_limits():
    cuda_bw = _backward.bwd_registered("CUDA")
    sm90 = torch.cuda.is_available() and any(
        torch.cuda.get_device_capability(i) == (9, 0) for i in range(torch.cuda.device_count()))
    assert cutlass.BwOp.is_available() == flash.BwOp.is_available() == cuda_bw
    assert flash3.BwOp.is_available() == cute_hopper.BwOp.is_available() == (cuda_bw and sm90)
    assert reference.BwOp.is_available() and reference.BwOp in fmha.ALL_BW_OPS
    h = torch.zeros(1, 4, 2, 64, dtype=torch.half, device="cuda" if torch.cuda.is_available() else "cpu")

    def reasons(op, q=h, k=None, v=None, **kw):
        return op.not_supported_reasons(Inputs(q, q if k is None else k, q if v is None else v, **kw))

    assert not any("dtype" in r for r in reasons(cutlass.BwOp, h.float()))  # fp32 backward
    assert any("dtype" in r for r in reasons(flash.BwOp, h.float()))
    g5 = h.view(1, 4, 1, 2, 64)
    assert any("BMGHK" in r for r in reasons(flash.BwOp, g5)) and any("BMGHK" in r for r in reasons(flash3.BwOp, g5))
    assert not any("BMGHK" in r for r in reasons(cutlass.BwOp, g5))
    assert any("dropout" in r for r in reasons(flash3.BwOp, p=0.1))
    assert not any("dropout" in r for r in reasons(flash.BwOp, p=0.1))
    assert any("not in [64, 96, 128]" in r for r in reasons(cute_hopper.BwOp, h.new_zeros(1, 4, 2, 256)))
    assert any("not in [64, 128, 192, 256]" in r for r in reasons(flash3.BwOp, h.new_zeros(1, 4, 2, 96)))
    padded = ab.BlockDiagonalPaddedKeysMask.from_seqlens([2, 2], 4, [3, 4])
    for op in (flash.BwOp, flash3.BwOp):
        assert any("attn_bias type" in r for r in reasons(op, h, h.new_zeros(1, 8, 2, 64),
                                                          h.new_zeros(1, 8, 2, 64), attn_bias=padded))
    paged = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([4], [3], torch.zeros(1, 1, dtype=torch.int32), 16)
    assert any("attn_bias type" in r for r in reasons(reference.BwOp, h, h.new_zeros(1, 16, 2, 64),
                                                      h.new_zeros(1, 16, 2, 64), attn_bias=paged))
    assert cutlass.BwOp.SUPPORTS_ATTN_BIAS_GRAD and reference.BwOp.SUPPORTS_ATTN_BIAS_GRAD
    assert not flash.BwOp.SUPPORTS_ATTN_BIAS_GRAD and not flash3.BwOp.SUPPORTS_ATTN_BIAS_GRAD


def test_dispatch_bw_on_cpu_and_bias_grad_requirement():
    q = torch.zeros(1, 4, 2, 8)
    assert dispatch._dispatch_bw(Inputs(q, q, q)) is reference.BwOp
    assert dispatch._dispatch_bw(Inputs(q, q, q, torch.zeros(1, 2, 4, 4)), True) is reference.BwOp
    reasons = dispatch.bw_not_supported_reasons(flash.BwOp, Inputs(q, q, q), True)
    assert any("bias" in r for r in reasons)
    paged = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([4], [3], torch.zeros(1, 1, dtype=torch.int32), 16)
    kv = torch.zeros(1, 16, 2, 8)
    with pytest.raises(NotImplementedError, match="memory_efficient_attention_backward"):
        dispatch._dispatch_bw(Inputs(q, kv, kv, paged))
    # a forward with a paged mask still runs; its backward has no operator
    out = fmha.memory_efficient_attention(q.requires_grad_(), kv, kv, paged)
    with pytest.raises(NotImplementedError, match="No operator found"):
        out.sum().backward()


def _fused_classes_on_cpu(monkeypatch):
    """Lets the fused operator classes take CPU tensors, so that dispatch can pick (and memoize) them."""
    for op in (flash3.FwOp, flash.FwOp, cutlass.FwOp, flash3.BwOp, flash.BwOp, cutlass.BwOp, triton_splitk.FwOp):
        monkeypatch.setattr(op, "SUPPORTED_DEVICES", {"cuda", "cpu"})
        monkeypatch.setattr(op, "is_available", classmethod(lambda cls: True))
    monkeypatch.setattr(dispatch, "_CHOICES", {})
    monkeypatch.setattr(dispatch, "_USE_FLASH_ATTENTION_3", True)


def _dispatch_variants():
    """Problems that differ in one thing each that some operator class checks (and some that no
    class checks, such as the sequence length), in an order where each key is seen before."""
    def t(*shape, dtype=torch.bfloat16, last_stride1=True):
        x = torch.randn(*shape).to(dtype)
        return x if last_stride1 else torch.randn(*shape[:-1], 2 * shape[-1]).to(dtype)[..., ::2]

    bf = t(1, 8, 2, 64)
    out = []
    for q in (bf, t(1, 9, 2, 64), t(1, 8, 2, 96), t(1, 8, 2, 64, dtype=torch.float32),
              t(1, 8, 2, 64, dtype=torch.float16), t(1, 8, 2, 64, last_stride1=False), t(1, 8, 1, 2, 64),
              t(1, 8, 64), t(1, 8, 2, 300)):
        out.append(Inputs(q, q, q))
    kv96 = t(1, 8, 2, 96)
    out.append(Inputs(bf, bf, kv96))  # K != Kv
    for bias in (ab.LowerTriangularMask(), ab.LowerTriangularFromBottomRightLocalAttentionMask(3),
                 torch.zeros(1, 2, 8, 8, dtype=torch.bfloat16), torch.zeros(1, 2, 8, 8, dtype=torch.float16),
                 torch.zeros(1, 2, 8, 8), ab.LowerTriangularMaskWithTensorBias(torch.zeros(1, 2, 8, 8)),
                 ab.BlockDiagonalCausalMask.from_seqlens([3, 5]), ab.BlockDiagonalGappyKeysMask.from_seqlens(
                     [3, 5], [0, 2, 8], [2, 4])):
        out.append(Inputs(bf, bf, bf, bias))
    out.append(Inputs(bf, bf, t(1, 8, 2, 64, last_stride1=False)))  # only V strided
    packed = torch.zeros(1, 8, 2, 64, dtype=torch.int32)
    out.append(Inputs(bf, packed, packed))  # a quantized K/V cache (int32 words)
    for page in (16, 256):  # head dim 96: past flash3, flash takes only the page sizes it divides
        paged = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([4, 4], [3, 4], torch.arange(2, dtype=torch.int32
                                                                                                ).view(2, 1), page)
        kv = t(1, 2 * page, 2, 96)
        out.append(Inputs(t(1, 8, 2, 96), kv, kv, paged))
    out += [Inputs(bf, bf, bf, p=0.1), Inputs(bf, bf, bf, scale=0.3), Inputs(bf, bf, bf, output_dtype=torch.float32),
            Inputs(bf, bf, bf, is_partial=True)]
    # decode shapes (the split-K class first), BMHK and GQA-expanded BMGHK, float64 output
    kv = t(1, 2048, 2, 64)
    kv5 = t(1, 2048, 2, 1, 64).expand(1, 2048, 2, 4, 64)
    out += [Inputs(t(1, 1, 2, 64), kv, kv), Inputs(t(1, 1, 2, 4, 64), kv5, kv5),
            Inputs(t(1, 1, 2, 64), kv, kv, output_dtype=torch.float64)]
    # the split-K grid: 16 query rows, then more rows than its 65535 chunks of 16 hold (stride-0 rows)
    small = t(1, 16, 1, 16)
    out += [Inputs(small, small, small), Inputs(small[:, :1].expand(1, 16 * 65535 + 1, 1, 16), small, small)]
    return out


def test_dispatch_memo_matches_the_full_walk(monkeypatch):
    """The memoized choice of each problem is the one a walk of the priority list makes, for
    problems that differ from each other in every checked property."""
    _fused_classes_on_cpu(monkeypatch)
    variants = _dispatch_variants()
    for direction, run in (("fw", lambda i: dispatch._dispatch_fw(i, True)),
                           ("bw", lambda i: dispatch._dispatch_bw(i, False)),
                           ("bw+db", lambda i: dispatch._dispatch_bw(i, True))):
        walked = []
        for inp in variants:
            saved = dict(dispatch._CHOICES)
            dispatch._CHOICES.clear()  # a walk from scratch
            try:
                walked.append(run(inp))
            except NotImplementedError:
                walked.append(None)
            dispatch._CHOICES.clear()
            dispatch._CHOICES.update(saved)
        for _ in range(2):  # the second pass answers from the memo
            for inp, want in zip(variants, walked):
                try:
                    got = run(inp)
                except NotImplementedError:
                    got = None
                assert got is want, (direction, inp.query.shape, inp.query.dtype, type(inp.attn_bias), got, want)
        assert dispatch._CHOICES, "nothing was memoized"
        if direction == "fw":
            assert triton_splitk.FwOp in walked and flash3.FwOp in walked and None in walked
    picked = {dispatch._dispatch_fw(i, True) for i in variants[:3]}
    assert picked == {flash3.FwOp, flash.FwOp}  # the memo holds more than one class
    # a pinned operator's check: empty exactly where the class's own check is, answered from the memo or not
    for _ in range(2):
        for inp in variants:
            for op in (flash3.FwOp, flash.FwOp, cutlass.FwOp, triton_splitk.FwOp, triton_splitk.FwOp_S8):
                assert (not dispatch.fw_not_supported_reasons(op, inp)) == (not op.not_supported_reasons(inp)), (
                    op, inp.query.shape)
            for op in (flash3.BwOp, flash.BwOp, cutlass.BwOp):
                for db in (False, True):
                    want = not op.not_supported_reasons(inp) and (op.SUPPORTS_ATTN_BIAS_GRAD or not db)
                    assert (not dispatch.bw_not_supported_reasons(op, inp, db)) == want


def test_dispatch_memo_follows_use_fa3(monkeypatch):
    _fused_classes_on_cpu(monkeypatch)
    q = torch.randn(1, 8, 2, 64).to(torch.bfloat16)
    assert dispatch._dispatch_fw(Inputs(q, q, q), False) is flash3.FwOp
    assert dispatch._dispatch_bw(Inputs(q, q, q)) is flash3.BwOp
    dispatch._set_use_fa3(False)
    assert dispatch._dispatch_fw(Inputs(q, q, q), False) is flash.FwOp
    assert dispatch._dispatch_bw(Inputs(q, q, q)) is flash.BwOp
    dispatch._set_use_fa3(True)
    assert dispatch._dispatch_fw(Inputs(q, q, q), False) is flash3.FwOp
    # the reference operators and decode shapes are never memoized
    x = torch.randn(1, 8, 2, 64, dtype=torch.float64)
    assert dispatch._dispatch_fw(Inputs(x, x, x), False) is reference.FwOp
    assert all(op is not reference.FwOp for op in dispatch._CHOICES.values())


@pytest.mark.parametrize("name", ["block_causal_br", "padded_causal_offset", "tensor", "none"])
@pytest.mark.parametrize("layout", ["BMHK", "BMGHK"])
def test_cpu_class_apply_matches_reference(name, layout):
    """cutlass.BwOp / flash.BwOp apply() logic (padded or packed LSE, mask descriptor, grouped
    heads) through the fused op's CPU implementation, against reference.BwOp."""
    gen = torch.Generator().manual_seed(6)
    bias = _masks()[name]
    B, mq, mk = _lens(bias, 5, 7)
    _, (q, k, v) = _make(layout, B, mq, mk, 8, 8, torch.float32, gen)
    bias, bt = _bias_of(name, bias, B, mq, mk, layout, torch.float32, gen)
    q, k, v = q.detach(), k.detach(), v.detach()
    inp = Inputs(q, k, v, bias, scale=0.5)
    out, ctx = reference.FwOp.apply(inp, needs_gradient=True)
    g = torch.randn(out.shape, generator=gen)
    want = reference.BwOp.apply(ctx, inp, g, bias_requires_grad=bt is not None)
    if isinstance(bias, ab.VARLEN_BIASES):
        qi = bias.q_seqinfo
        lse = ctx.lse.reshape(1, -1, ctx.lse.shape[-1])
        padded = cutlass._packed_to_padded_lse(lse, qi.seqstart_py, qi.max_seqlen)
        ctx = Context(lse=padded.reshape(padded.shape[0], *ctx.lse.shape[1:-1], padded.shape[-1]), out=out)
    got = cutlass.BwOp.apply(ctx, inp, g, bias_requires_grad=bt is not None)
    for a, b in ((got.dq, want.dq), (got.dk, want.dk), (got.dv, want.dv), (got.db, want.db)):
        if b is None:
            assert a is None
        else:
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match="bias gradient"):
        flash.BwOp.apply(ctx, inp, g, bias_requires_grad=True)


def test_compile_fullgraph_training_step():
    gen = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 8, 2, 16, generator=gen, requires_grad=True) for _ in range(3))
    b = torch.randn(2, 2, 8, 8, generator=gen, requires_grad=True)

    def loss(q, k, v, b):
        out = fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularMaskWithTensorBias(b))
        return (out * out).sum()

    def grads(fn):
        for t in (q, k, v, b):
            t.grad = None
        fn(q, k, v, b).backward()
        return [t.grad.clone() for t in (q, k, v, b)]

    eager = grads(loss)
    compiled = grads(torch.compile(loss, fullgraph=True, backend="aot_eager"))
    for a, c in zip(eager, compiled):
        torch.testing.assert_close(a, c)
