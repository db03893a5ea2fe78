"""The attention-merge ops (torch.ops.mslk.fmha_merge_attentions_varargs, its backward, and the
in-place merge behind triton_splitk.merge_attentions) against float64 math on random shards:
lists and stacked shards, BMHK and BMGHK, masked (-inf) shards and rows, more shards than the
kernel takes inline, non-contiguous shards, gradients, errors, opcheck and torch.compile."""

import math

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import triton_splitk

ops = torch.ops.mslk
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def shards(S, B, M, G, H, K, dtype, device, masked=True, dead_row=True):
    attn = [torch.randn(B, M, G, H, K, dtype=torch.float64).to(dtype).to(device) for _ in range(S)]
    lse = [(3 * torch.randn(B, G, H, M, dtype=torch.float64)).float() for _ in range(S)]
    if masked and S > 1:
        lse[0][:, :, 0, :] = -math.inf  # one shard masked for every row of head 0
        for x in lse if dead_row else []:
            x[0, 0, -1, 0] = -math.inf  # a row with every shard masked
    return attn, [x.to(device) for x in lse]


def ref(attn, lse):
    """float64 merge: (out [B, M, G, H, K], lse [B, G, H, M])."""
    A = torch.stack([a.double().cpu() for a in attn])
    L = torch.stack([x.double().cpu() for x in lse])
    Lm = torch.logsumexp(L, 0)
    w = torch.exp(L - Lm).nan_to_num(0.0)  # all -inf rows: weight 0
    out = (w.permute(0, 1, 4, 2, 3).unsqueeze(-1) * A).sum(0)
    return out, Lm


def assert_merge(out, lse_out, attn, lse, dtype):
    want, want_lse = ref(attn, lse)
    tol = TOL[dtype]
    torch.testing.assert_close(out.double().cpu(), want, rtol=tol, atol=tol)
    if lse_out is not None:
        got = lse_out.double().cpu()
        assert torch.equal(torch.isneginf(got), torch.isneginf(want_lse))
        f = torch.isfinite(want_lse)
        torch.testing.assert_close(got[f], want_lse[f], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("S", [1, 2, 5, 16, 17, 40])
def test_varargs_forward(device, dtype, S):
    B, M, G, H, K = 2, 7, 2, 3, 40  # K not a multiple of the 128-column sweep
    attn, lse = shards(S, B, M, G, H, K, dtype, device)
    out, lse_out = ops.fmha_merge_attentions_varargs(attn, lse, True, None, B, M, G, H, K)
    assert out.dtype == dtype and lse_out.dtype == torch.float32
    assert_merge(out, lse_out, attn, lse, dtype)
    if S > 1:  # the row with every shard masked
        assert torch.equal(out[0, 0, 0, -1].cpu(), torch.zeros(K, dtype=dtype))
        assert torch.isneginf(lse_out[0, 0, -1, 0])
    (only,) = ops.fmha_merge_attentions_varargs(attn, lse, False, torch.float32, B, M, G, H, K)
    assert only.dtype == torch.float32
    assert_merge(only, None, attn, lse, dtype)


def test_varargs_long_rows_and_noncontiguous(device):
    B, M, G, H, K = 1, 3, 1, 2, 300  # several column sweeps per row
    big = torch.randn(4, B, M, G, H, 2 * K, device=device)
    attn = [big[s, ..., ::1][..., :K] for s in range(3)]  # views: row stride 2K
    lse = [torch.randn(B, H, G, M, device=device).transpose(1, 2) for _ in range(3)]  # strided LSE
    out, lse_out = ops.fmha_merge_attentions_varargs(attn, lse, True, None, B, M, G, H, K)
    assert_merge(out, lse_out, attn, lse, torch.float32)
    # shards with different strides: merged in a common layout
    attn2 = [attn[0].contiguous(), attn[1], attn[2]]
    out2, _ = ops.fmha_merge_attentions_varargs(attn2, lse, True, None, B, M, G, H, K)
    torch.testing.assert_close(out2, out, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layout", ["bmhk", "bmghk"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fmha_merge_attentions_paths(device, layout, dtype):
    S, B, M, G, H, K = 3, 2, 5, 2, 3, 16
    attn, lse = shards(S, B, M, G, H, K, dtype, device)
    if layout == "bmhk":
        attn, lse = [a[:, :, 0] for a in attn], [x[:, 0] for x in lse]
    want_attn = [a if layout == "bmghk" else a.unsqueeze(2) for a in attn]
    want_lse = [x if layout == "bmghk" else x.unsqueeze(1) for x in lse]
    for split_a, split_l in ((attn, lse), (torch.stack(attn), torch.stack(lse))):
        out, lse_out = fmha.merge_attentions(split_a, split_l)
        assert out.shape == attn[0].shape and lse_out.shape == lse[0].shape
        if layout == "bmhk":
            out, lse_out = out.unsqueeze(2), lse_out.unsqueeze(1)
        assert_merge(out, lse_out, want_attn, want_lse, dtype)


def test_triton_splitk_merge_in_place(device):
    S, B, M, H, K = 4, 2, 6, 3, 24
    attn, lse = shards(S, B, M, 1, H, K, torch.bfloat16, device)
    A, L = torch.stack([a[:, :, 0] for a in attn]), torch.stack([x[:, 0] for x in lse])  # BMHK
    out = torch.full((B, M, H, K), float("nan"), dtype=torch.float32, device=device)
    lse_out = torch.full((B, H, M), float("nan"), device=device)
    assert triton_splitk.merge_attentions(out, lse_out, A, L) is None
    assert_merge(out.unsqueeze(2), lse_out.unsqueeze(1), attn, lse, torch.bfloat16)
    out2 = torch.full_like(out, float("nan"))
    triton_splitk.merge_attentions(out2, None, A, L)
    assert torch.equal(out2, out)


@pytest.mark.parametrize("S", [3, 18])
def test_backward_matches_float64_autograd(device, S):
    B, M, G, H, K = 1, 4, 1, 2, 8
    # float64 autograd of logsumexp is NaN on a row with every shard masked: partial masks only
    attn, lse = shards(S, B, M, G, H, K, torch.float32, device, dead_row=False)
    a = [x.clone().requires_grad_() for x in attn]
    l_ = [x.clone().requires_grad_() for x in lse]
    out, lse_out = fmha.merge_attentions(a, l_)
    g_out, g_lse = torch.randn_like(out), torch.randn_like(lse_out)
    torch.autograd.backward([out, lse_out], [g_out, g_lse])

    a64 = [x.detach().double().cpu().requires_grad_() for x in attn]
    l64 = [x.detach().double().cpu().requires_grad_() for x in lse]
    A, L = torch.stack(a64), torch.stack(l64)
    Lm = torch.logsumexp(L, 0)
    o64 = (torch.exp(L - Lm).permute(0, 1, 4, 2, 3).unsqueeze(-1) * A).sum(0)
    torch.autograd.backward([o64, Lm], [g_out.double().cpu(), g_lse.double().cpu()])
    for got, want in zip(a + l_, a64 + l64):
        torch.testing.assert_close(got.grad.double().cpu(), want.grad, rtol=1e-4, atol=1e-5)


def test_backward_op_direct(device):
    B, M, G, H, K = 2, 3, 1, 2, 40
    attn, lse = shards(20, B, M, G, H, K, torch.float16, device)  # > 16 shards: chunked
    out, lse_out = ops.fmha_merge_attentions_varargs(attn, lse, True, torch.float32, B, M, G, H, K)
    d_out = torch.randn_like(out)
    d_attn, d_lse = ops.merge_attentions_varargs_backward(attn, lse, out, lse_out, d_out, None)
    L = lse_out.double().cpu()
    for s in range(len(attn)):
        w = torch.exp(lse[s].double().cpu() - L).nan_to_num(0.0).permute(0, 3, 1, 2).unsqueeze(-1)
        torch.testing.assert_close(d_attn[s].double().cpu(), w * d_out.double().cpu(), rtol=2e-3, atol=2e-3)
        dot = (d_out.double().cpu() * (attn[s].double().cpu() - out.double().cpu())).sum(-1, keepdim=True)
        torch.testing.assert_close(d_lse[s].double().cpu(), (w * dot)[..., 0].permute(0, 2, 3, 1),
                                   rtol=2e-3, atol=2e-3)
        assert d_attn[s].dtype == torch.float16 and d_lse[s].dtype == torch.float32


def test_errors(device):
    B, M, G, H, K = 1, 3, 1, 2, 8
    attn, lse = shards(2, B, M, G, H, K, torch.float32, device)
    with pytest.raises(ValueError, match="one tensor per shard"):
        ops.fmha_merge_attentions_varargs(attn, lse[:1], True, None, B, M, G, H, K)
    with pytest.raises(ValueError, match="empty"):  # (an empty list reaches no dispatch key)
        fmha.merge_attentions([], [])
    with pytest.raises(ValueError, match="'attn_split' must have shape"):
        ops.fmha_merge_attentions_varargs(attn, lse, True, None, B, M, G, H, K + 1)
    with pytest.raises(ValueError, match="'lse_split' must have shape"):
        ops.fmha_merge_attentions_varargs(attn, [x.transpose(2, 3) for x in lse], True, None, B, M, G, H, K)
    with pytest.raises(TypeError, match="'lse_split' must have dtype"):
        ops.fmha_merge_attentions_varargs(attn, [x.double() for x in lse], True, None, B, M, G, H, K)
    with pytest.raises(TypeError, match="one dtype"):
        ops.fmha_merge_attentions_varargs([attn[0], attn[1].half()], lse, True, None, B, M, G, H, K)
    with pytest.raises(TypeError, match="output_dtype"):
        ops.fmha_merge_attentions_varargs(attn, lse, True, torch.int32, B, M, G, H, K)
    strided = [torch.randn(B, M, G, K, H, device=device).transpose(-1, -2) for _ in range(2)]  # last stride H
    with pytest.raises(ValueError, match="stride 1"):
        ops.fmha_merge_attentions_varargs(strided, lse, True, None, B, M, G, H, K)
    with pytest.raises(ValueError, match="'attn_out' must have shape"):
        triton_splitk.merge_attentions(torch.empty(B, M, H, K + 1, device=device), None,
                                       torch.stack(attn)[:, :, :, 0], torch.stack(lse)[:, :, 0])
    if device == "cuda":
        with pytest.raises(RuntimeError, match="same device"):
            ops.fmha_merge_attentions_varargs([attn[0], attn[1].cpu()], lse, True, None, B, M, G, H, K)


def test_opcheck(device):
    B, M, G, H, K = 1, 3, 2, 2, 8
    attn, lse = shards(3, B, M, G, H, K, torch.float32, device, masked=False)
    torch.library.opcheck(ops.fmha_merge_attentions_varargs.default, (attn, lse, True, None, B, M, G, H, K))
    torch.library.opcheck(ops.fmha_merge_attentions_varargs.default, (attn, lse, False, torch.bfloat16, B, M, G, H, K))
    out, lse_out = ops.fmha_merge_attentions_varargs(attn, lse, True, None, B, M, G, H, K)
    torch.library.opcheck(ops.merge_attentions_varargs_backward.default,
                          (attn, lse, out, lse_out, torch.randn_like(out), torch.randn_like(lse_out)))
    torch.library.opcheck(ops._fmha_merge_attentions_into.default,
                          (torch.empty_like(out), torch.empty_like(lse_out), torch.stack(attn), torch.stack(lse)))


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    S, B, M, H, K = 3, 2, 4, 2, 16
    attn = [torch.randn(B, M, H, K, device=device) for _ in range(S)]
    lse = [torch.randn(B, H, M, device=device) for _ in range(S)]

    def f(a, l_):
        out, lse_out = fmha.merge_attentions(a, l_)
        return out * 2, lse_out + 1

    eager = f(attn, lse)
    compiled = torch.compile(f, fullgraph=True)(attn, lse)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(e, c, rtol=1e-6, atol=1e-6)
