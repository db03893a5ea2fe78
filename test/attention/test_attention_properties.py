"""Property tests (hypothesis, CPU) of memory_efficient_attention forward and backward: small
float64 problems with a random mask from the mask classes (dense, bottom-right, local,
block-diagonal, padded keys, tensor biases), a random scale and K != Kv, against float64 autograd
of a plain softmax attention over the materialized mask (oracle.attention_f64)."""

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from mslk.attention import fmha  # noqa: E402
from mslk.attention.fmha import attn_bias as ab  # noqa: E402
from test.attention import oracle  # noqa: E402

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None)
F64 = torch.float64
lens = st.integers(0, 4)


@st.composite
def problems(draw):
    """(B, Mq, Mkv, bias or "tensor"/"causal_tensor", layout)."""
    kind = draw(st.sampled_from(["none", "causal", "causal_br", "causal_local_br", "local_br", "tensor",
                                 "causal_tensor", "block", "block_causal", "block_causal_br", "padded",
                                 "padded_causal_offset"]))
    B, mq, mk = draw(st.integers(1, 2)), draw(st.integers(0, 7)), draw(st.integers(0, 7))
    layout = draw(st.sampled_from(["BMHK", "BMK"])) if kind in ("none", "causal", "tensor") else "BMHK"
    bias = kind
    if kind == "causal":
        bias = ab.LowerTriangularMask()
    elif kind == "causal_br":
        bias = ab.LowerTriangularFromBottomRightMask()
    elif kind == "causal_local_br":
        bias = ab.LowerTriangularFromBottomRightLocalAttentionMask(draw(st.integers(1, 6)))
    elif kind == "local_br":
        bias = ab.LocalAttentionFromBottomRightMask(draw(st.integers(0, 4)), draw(st.integers(0, 4)))
    elif kind == "none":
        bias = None
    elif kind in ("block", "block_causal", "block_causal_br", "padded", "padded_causal_offset"):
        n = draw(st.integers(1, 3))
        q = draw(st.lists(lens, min_size=n, max_size=n))
        if kind == "block":
            bias = ab.BlockDiagonalMask.from_seqlens(q, draw(st.lists(lens.map(lambda x: x + 1), min_size=n, max_size=n)))
        elif kind == "block_causal":
            bias = ab.BlockDiagonalCausalMask.from_seqlens(q)
        elif kind == "block_causal_br":  # each K/V block at least as long as its Q block
            bias = ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens(q, [x + draw(lens) for x in q])
        else:
            pad = max(q) + 3
            kv = [min(pad, x + draw(lens)) for x in q]
            cls = ab.BlockDiagonalPaddedKeysMask if kind == "padded" else ab.BlockDiagonalCausalWithOffsetPaddedKeysMask
            bias = cls.from_seqlens(q, pad, kv)
        B, mq, mk = 1, bias.q_seqinfo.total, bias._kv_total()
    return B, mq, mk, bias, layout


@PROPERTY
@given(prob=problems(), H=st.integers(1, 3), K=st.integers(1, 12), Kv=st.integers(1, 12),
       scale=st.one_of(st.none(), st.floats(0.05, 2.0)), seed=st.integers(0, 2**31 - 1))
def test_forward_backward_vs_float64_autograd(prob, H, K, Kv, scale, seed):
    B, mq, mk, bias, layout = prob
    g = torch.Generator().manual_seed(seed)

    def leaf(*shape):
        return torch.randn(*shape, generator=g, dtype=F64).requires_grad_()

    if layout == "BMK":
        q, k, v = leaf(B, mq, K), leaf(B, mk, K), leaf(B, mk, Kv)
    else:
        q, k, v = leaf(B, mq, H, K), leaf(B, mk, H, K), leaf(B, mk, H, Kv)
    bt = None
    if bias in ("tensor", "causal_tensor"):
        bt = leaf(*((B, mq, mk) if layout == "BMK" else (1, H, mq, mk)))
        bias = bt if bias == "tensor" else ab.LowerTriangularMaskWithTensorBias(bt)
    wrt = [q, k, v] + ([bt] if bt is not None else [])

    out = fmha.memory_efficient_attention(q, k, v, bias, scale=scale)
    assert out.shape == (*q.shape[:-1], Kv) and out.dtype == F64
    dout = torch.randn(out.shape, generator=g, dtype=F64)
    got = torch.autograd.grad(out, wrt, dout, allow_unused=True)

    # Oracle: the same leaves, float64 autograd of softmax(q k^T * scale + mask) v.
    if bias is None:
        dense = None
    elif isinstance(bias, torch.Tensor):
        dense = bias
    else:
        dense = bias.materialize((B, H, mq, mk) if isinstance(bias, ab.LowerTriangularMaskWithTensorBias)
                                 else (mq, mk), F64)
    if layout == "BMK":
        if isinstance(dense, torch.Tensor) and dense.ndim == 3:
            dense = dense.unsqueeze(1)
        want_out, _ = oracle.attention_f64(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2), dense, scale)
        want_out = want_out.squeeze(2)
    else:
        want_out, _ = oracle.attention_f64(q, k, v, dense, scale)
    want = torch.autograd.grad(want_out, wrt, dout, allow_unused=True)

    torch.testing.assert_close(out, want_out, rtol=1e-9, atol=1e-9)
    for name, a, b in zip(["dq", "dk", "dv", "dbias"], got, want):
        a = torch.zeros_like(b) if a is None else a
        b = torch.zeros_like(a) if b is None else b
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=0, atol=1e-9 * (b.abs().amax().item() + 1.0) if b.numel() else 0,
                                   msg=name)
