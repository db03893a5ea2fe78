"""Raw attention backward ops served by the fused ops (mslk.attention.fmha._raw_bwd_ops):
mslk_flash / mslk_flash3 flash_bwd, torch.ops.mslk.fmha_fwd / fmha_bwd and
cutlass_blackwell_fmha_fwd / _bwd, cutlass_blackwell_fmha_func. CPU here (float64 against float64
autograd of oracle.attention_f64); the CUDA variants run the same checks in fp16/bf16."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import mslk  # noqa: F401
from mslk.attention.cutlass_blackwell_fmha import _cutlass_blackwell_fmha_forward, cutlass_blackwell_fmha_func
from mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_custom_op import cutlass_blackwell_fmha_custom_op
from test.attention import oracle
from test.attention.tolerance import GRAD_TOL, assert_attention_close, assert_grad_close, d_term_slack, lse_f64

pytestmark = pytest.mark.skipif(not hasattr(torch.ops.mslk, "fmha_fused_bwd"), reason="fmha_fused_bwd not built")
CUDA = torch.cuda.is_available() and hasattr(torch.ops.mslk, "fmha_fused_bwd")
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])


def _t(*shape, dtype=torch.float64, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype).requires_grad_()


def _pred(causal, wl, wr, bottom_right):
    """Visibility of key j from query i (lengths mq, mk) for the raw ops' conventions."""
    def f(i, j, mq, mk):
        d = j - i - ((mk - mq) if bottom_right else 0)
        ok = True
        if causal or wr >= 0:
            ok = d <= (0 if causal else wr)
        if wl >= 0:
            ok = ok and d >= -wl
        return ok
    return f


def _ref_grads(q, k, v, g, scale, pred, cu_q=None, cu_k=None, got_out=None):
    """float64 out and (dq, dk, dv) of attention with per-head K/V repeated for GQA; with got_out
    (the op's forward output), also the D-term slack of each gradient (tolerance.d_term_slack)."""
    q, k, v = (x.detach().double().cpu().requires_grad_() for x in (q, k, v))
    rep = q.shape[-2] // k.shape[-2]
    kk, vv = k.repeat_interleave(rep, -2), v.repeat_interleave(rep, -2)
    if cu_q is None:
        mask = oracle.dense_mask(pred, q.shape[1], k.shape[1])
        q4, k4, v4, g4 = q, kk, vv, g
    else:
        lq = [b - a for a, b in zip(cu_q, cu_q[1:])]
        lanes = [list(range(a, b)) for a, b in zip(cu_k, cu_k[1:])]
        mask = oracle.blocks_mask(pred, lq, lanes, k.shape[0])
        q4, k4, v4, g4 = q[None], kk[None], vv[None], g[None]
    out4, _ = oracle.attention_f64(q4, k4, v4, mask, scale)
    out = out4 if cu_q is None else out4[0]
    grads = torch.autograd.grad(out, (q, k, v), g.double().cpu())
    if got_out is None:
        return out, grads
    got4 = got_out if cu_q is None else got_out[None]
    return out, grads, d_term_slack(lse_f64(q4, k4, mask, scale), (q, k, v), g4, got4, out4)


def _close(got, want, dtype):
    """got against the float64 oracle: per-row bounds for an fp16 / bf16 attention output
    (tolerance.py), a tolerance relative to the tensor's largest value otherwise."""
    if dtype in GRAD_TOL:
        assert_attention_close(got, want, dtype)
        return
    tol = {torch.float64: 1e-6, torch.float32: 1e-4}[dtype]
    scale = want.abs().max().item() + 1e-3
    assert (got.double().cpu() - want).abs().max().item() <= tol * scale


def _close_grads(got, want, slack, dtype):
    for name, a, w, sl in zip(("dq", "dk", "dv"), got, want, slack):
        if dtype in GRAD_TOL:
            assert_grad_close(a, w, dtype, sl, what=name)
        else:
            _close(a, w, dtype)


def _dtypes(device):
    return [torch.float64] if device == "cpu" else [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal,wl,wr", [(False, -1, -1), (True, -1, -1), (False, 2, 1), (True, 3, -1)])
@pytest.mark.parametrize("Hkv", [4, 2, 1])
def test_flash_bwd_dense(device, causal, wl, wr, Hkv):
    for dtype in _dtypes(device):
        q, k, v = _t(2, 5, 4, 64, dtype=dtype, device=device), _t(2, 7, Hkv, 64, dtype=dtype, device=device, seed=1), \
            _t(2, 7, Hkv, 64, dtype=dtype, device=device, seed=2)
        out, lse, rng = torch.ops.mslk_flash.flash_fwd(q, k, v, None, None, None, 5, 7, 0.0, 0.125, causal, wl, wr,
                                                        False, None)
        g = torch.randn_like(out)
        got = torch.ops.mslk_flash.flash_bwd(False, g, q, k, v, out, lse, None, None, 5, 7, 0.0, 0.125, causal, wl,
                                             wr, rng)
        _, want, slack = _ref_grads(q, k, v, g, 0.125, _pred(causal, wl, wr if not causal else 0, True), got_out=out)
        for a, x in zip(got, (q, k, v)):
            assert a.shape == x.shape and a.dtype == x.dtype
        _close_grads(got, want, slack, dtype)
        got3 = torch.ops.mslk_flash3.flash_bwd(False, g, q, k, v, out, lse, None, None, 5, 7, 0.125, causal, wl, wr)
        for a, b in zip(got, got3):
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_bwd_varlen_gqa(device, causal):
    cq, ck = [0, 2, 2, 7], [0, 3, 5, 9]  # an empty query block, unequal lengths
    for dtype in _dtypes(device):
        q, k, v = _t(7, 4, 64, dtype=dtype, device=device), _t(9, 2, 64, dtype=dtype, device=device, seed=1), \
            _t(9, 2, 64, dtype=dtype, device=device, seed=2)
        cu_q, cu_k = (torch.tensor(x, dtype=torch.int32, device=device) for x in (cq, ck))
        out, lse, rng = torch.ops.mslk_flash.flash_fwd(q, k, v, cu_q, cu_k, None, 5, 4, 0.0, 0.125, causal, -1, -1,
                                                        False, None)
        g = torch.randn_like(out)
        got = torch.ops.mslk_flash.flash_bwd(False, g, q, k, v, out, lse, cu_q, cu_k, 5, 4, 0.0, 0.125, causal, -1,
                                             -1, rng)
        _, want, slack = _ref_grads(q, k, v, g, 0.125, _pred(causal, -1, 0 if causal else -1, True), cq, ck,
                                    got_out=out)
        _close_grads(got, want, slack, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("varlen", [False, True])
def test_flash_dropout_round_trip(device, varlen):
    """flash_fwd with p > 0 returns its rng_state; flash_bwd with it gives the gradients of the
    attention with the keep mask of fmha_dropout_mask (per query head, packed rows when varlen)."""
    p, scale = 0.3, 0.125
    dtype = _dtypes(device)[0]
    if varlen:
        cq, ck = [0, 3, 8], [0, 4, 11]
        q, k, v = _t(8, 4, 64, dtype=dtype, device=device), _t(11, 2, 64, dtype=dtype, device=device, seed=1), \
            _t(11, 2, 64, dtype=dtype, device=device, seed=2)
        cu = [torch.tensor(x, dtype=torch.int32, device=device) for x in (cq, ck)]
        B, Mq, Mk = 1, 8, 11
    else:
        q, k, v = _t(2, 5, 4, 64, dtype=dtype, device=device), _t(2, 7, 2, 64, dtype=dtype, device=device, seed=1), \
            _t(2, 7, 2, 64, dtype=dtype, device=device, seed=2)
        cu = [None, None]
        B, Mq, Mk = 2, 5, 7
    out, lse, rng = torch.ops.mslk_flash.flash_fwd(q, k, v, cu[0], cu[1], None, 5, 7, p, scale, True, -1, -1, False,
                                                    None)
    assert rng.dtype == torch.int64 and rng.shape == (2,) and rng.device == q.device
    g = torch.randn_like(out)
    got = torch.ops.mslk_flash.flash_bwd(False, g, q, k, v, out, lse, cu[0], cu[1], 5, 7, p, scale, True, -1, -1, rng)
    keep = torch.ops.mslk.fmha_dropout_mask(rng.cpu(), B, 4, Mq, Mk, p, torch.device("cpu")).double() / (1 - p)
    qd, kd, vd = (x.detach().double().cpu().requires_grad_() for x in (q, k, v))
    if not varlen:
        qd4, kd4, vd4 = qd, kd, vd
        mask = oracle.dense_mask(_pred(True, -1, 0, True), Mq, Mk)
    else:
        qd4, kd4, vd4 = qd[None], kd[None], vd[None]
        lanes = [list(range(a, b)) for a, b in zip(ck, ck[1:])]
        mask = oracle.blocks_mask(_pred(True, -1, 0, True), [3, 5], lanes, Mk)
    kk, vv = kd4.repeat_interleave(2, 2), vd4.repeat_interleave(2, 2)
    s = torch.einsum("bmhk,bnhk->bhmn", qd4, kk) * scale + mask
    ref4 = torch.einsum("bhmn,bnhk->bmhk", torch.softmax(s, -1) * keep, vv)
    ref = ref4.reshape(out.shape)
    _close(out, ref.detach(), dtype)
    want = torch.autograd.grad(ref, (qd, kd, vd), g.double().cpu())
    slack = d_term_slack(lse_f64(qd4, kk, mask, scale), (qd, kd, vd), g.reshape(ref4.shape), out.reshape(ref4.shape),
                         ref4)
    _close_grads(got, want, slack, dtype)


def test_flash_bwd_errors_and_fakes():
    q, k, v = (x.detach() for x in (_t(1, 4, 2, 8), _t(1, 4, 2, 8, seed=1), _t(1, 4, 2, 8, seed=2)))
    lse = torch.zeros(1, 2, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="multiple"):
        torch.ops.mslk_flash3.flash_bwd(False, q, q, k[:, :, :1].expand(1, 4, 3, 8).contiguous(), v, q, lse, None,
                                        None, 4, 4, 1.0, False, -1, -1)
    with pytest.raises(ValueError, match="cu_seqlens_k"):
        torch.ops.mslk_flash3.flash_bwd(False, q[0], q[0], k[0], v[0], q[0], lse[0],
                                        torch.tensor([0, 4], dtype=torch.int32), None, 4, 4, 1.0, False, -1, -1)
    k1, rng = k[:, :, :1].contiguous(), torch.zeros(2, dtype=torch.int64)
    with FakeTensorMode() as mode:
        fq, fk = mode.from_tensor(q), mode.from_tensor(k1)
        dq, dk, dv = torch.ops.mslk_flash.flash_bwd(False, fq, fq, fk, fk, fq, mode.from_tensor(lse), None, None, 4,
                                                    4, 0.0, 1.0, False, -1, -1, mode.from_tensor(rng))
        assert dq.shape == q.shape and dk.shape == fk.shape and dv.shape == fk.shape
    args = (False, q, q, k, v, q, lse, None, None, 4, 4, 0.5, True, -1, -1)
    torch.library.opcheck(torch.ops.mslk_flash3.flash_bwd.default, args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal,wl,wr,br", [(False, -1, -1, True), (True, -1, -1, True), (True, -1, -1, False),
                                             (False, 2, 1, False), (True, 2, -1, True)])
def test_blackwell_ops_dense(device, causal, wl, wr, br):
    for dtype in _dtypes(device):
        q, k, v = _t(2, 5, 4, 64, dtype=dtype, device=device), _t(2, 7, 2, 64, dtype=dtype, device=device, seed=1), \
            _t(2, 7, 2, 64, dtype=dtype, device=device, seed=2)
        out, lse = torch.ops.mslk.fmha_fwd(q, k, v, softmax_scale=0.2, causal=causal, window_size_left=wl,
                                           window_size_right=wr, bottom_right=br)
        assert lse.shape == (2, 4, 5) and lse.dtype == torch.float32
        g = torch.randn_like(out)
        ref, want, slack = _ref_grads(q, k, v, g, 0.2, _pred(causal, wl, wr, br), got_out=out)
        _close(out, ref, dtype)
        got = torch.ops.mslk.fmha_bwd(g, q, k, v, out, lse, softmax_scale=0.2, causal=causal, window_size_left=wl,
                                      window_size_right=wr, bottom_right=br, deterministic=True)
        _close_grads(got, want, slack, dtype)
        got2 = torch.ops.mslk.cutlass_blackwell_fmha_bwd(g, q, k, v, out, lse, None, None, None, None, 0.2, causal,
                                                         wl, wr, br, True)
        for a, b in zip(got, got2):
            torch.testing.assert_close(a, b)
        o2 = cutlass_blackwell_fmha_func(q, k, v, 0.2, causal, window_size=(wl, wr), bottom_right=br)
        torch.testing.assert_close(o2, out)
        _close_grads(torch.autograd.grad(o2, (q, k, v), g), want, slack, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_blackwell_ops_varlen_and_seqlen_kv(device):
    cq, ck = [0, 3, 4, 9], [0, 2, 8, 12]
    cu_q, cu_k = (torch.tensor(x, dtype=torch.int32, device=device) for x in (cq, ck))
    for dtype in _dtypes(device):
        q, k, v = _t(9, 2, 64, dtype=dtype, device=device), _t(12, 2, 64, dtype=dtype, device=device, seed=1), \
            _t(12, 2, 64, dtype=dtype, device=device, seed=2)
        out = cutlass_blackwell_fmha_func(q, k, v, None, True, cu_q, cu_k, 5, 6, bottom_right=False)
        g = torch.randn_like(out)
        ref, want, slack = _ref_grads(q, k, v, g, 0.125, _pred(True, -1, -1, False), cq, ck, got_out=out)
        _close(out, ref, dtype)
        _close_grads(torch.autograd.grad(out, (q, k, v), g), want, slack, dtype)
        o, lse = _cutlass_blackwell_fmha_forward(q, k, v, cu_q, cu_k, 5, 6, None, True, bottom_right=False)
        assert lse.shape == (2, 9)
        torch.testing.assert_close(o, out)
        # dense with per-batch key counts (seqlen_kv): forward only
        qd, kd = _t(2, 3, 2, 64, dtype=dtype, device=device), _t(2, 6, 2, 64, dtype=dtype, device=device, seed=3)
        lens = torch.tensor([4, 6], dtype=torch.int32, device=device)
        od = cutlass_blackwell_fmha_custom_op(qd, kd, kd, causal=True, seqlen_kv=lens)
        for b, n in enumerate((4, 6)):
            ref_b, _ = _ref_grads(qd[b:b + 1], kd[b:b + 1, :n], kd[b:b + 1, :n], torch.zeros_like(qd[b:b + 1]),
                                  0.125, _pred(True, -1, -1, True))
            _close(od[b:b + 1], ref_b, dtype)


def test_blackwell_fakes():
    q = torch.randn(2, 5, 4, 16)
    with FakeTensorMode() as mode:
        fq = mode.from_tensor(q)
        out, lse = torch.ops.mslk.cutlass_blackwell_fmha_fwd(fq, fq, fq, None, None, None, None, None, False, None,
                                                            None)
        assert out.shape == q.shape and lse.shape == (2, 4, 5)
        dq, dk, dv = torch.ops.mslk.fmha_bwd(fq, fq, fq, fq, fq, lse)
        assert dq.shape == dk.shape == dv.shape == q.shape
    qd, kv, n = q[:, :1], q[:, :, :1].contiguous(), torch.full((2,), 5, dtype=torch.int32)
    with FakeTensorMode() as mode:  # the decode op (test_blackwell_decode.py checks its values)
        out, lse = torch.ops.mslk.fmha_gen_fwd(mode.from_tensor(qd), mode.from_tensor(kv), mode.from_tensor(kv),
                                               mode.from_tensor(n), split_k_size=2)
        assert out.shape == (2, 1, 4, 3, 16) and lse.shape == (2, 3, 4, 1)
