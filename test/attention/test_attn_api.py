"""Forward-side attention API: compile-friendly wrappers, trainable partial attention, raw backend
ops and standalone facades. Oracles: test/attention/oracle.py (float64, explicit softmax)."""

import math

import pytest
import torch

import mslk  # noqa: F401
from mslk.attention import fmha
from mslk.attention.fmha.merge_training import (Partial, memory_efficient_attention_partial_autograd,
                                                merge_attentions_autograd)
from test.attention import oracle
from test.attention.tolerance import assert_attention_close


def _qkv(B, Mq, Mk, H, K, dtype=torch.float64, Hkv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Mq, H, K, generator=g, dtype=torch.float64).to(dtype)
    k = torch.randn(B, Mk, Hkv or H, K, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(B, Mk, Hkv or H, K, generator=g, dtype=torch.float64).to(dtype)
    return q, k, v


# --- compile-friendly wrappers -------------------------------------------------------------------

def test_compile_wrappers_schemas():
    assert str(torch.ops.mslk.memory_efficient_attention_forward.default._schema) == (
        "mslk::memory_efficient_attention_forward(Tensor q, Tensor k, Tensor v, Tensor? b=None, float p=0., "
        "float? scale=None) -> Tensor")
    assert "Tensor b, float p=0., float? scale=None" in str(
        torch.ops.mslk.memory_efficient_attention_forward_with_bias.default._schema)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compile_wrappers_values_and_opcheck(dtype):
    q, k, v = _qkv(2, 8, 12, 3, 16, dtype)
    bias = torch.randn(2, 3, 8, 12).to(dtype)
    out = torch.ops.mslk.memory_efficient_attention_forward(q, k, v)
    ref, _ = oracle.attention_f64(q, k, v)
    assert out.dtype == dtype and out.shape == q.shape
    out_b = torch.ops.mslk.memory_efficient_attention_forward_with_bias(q, k, v, bias, scale=0.3)
    ref_b, _ = oracle.attention_f64(q, k, v, bias, scale=0.3)
    for got, want in ((out, ref), (out_b, ref_b)):
        if dtype == torch.bfloat16:
            assert_attention_close(got, want, dtype)
        else:
            torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
    torch.library.opcheck(torch.ops.mslk.memory_efficient_attention_forward.default, (q, k, v))
    torch.library.opcheck(torch.ops.mslk.memory_efficient_attention_forward.default, (q, k, v, bias, 0.0, 0.5))
    torch.library.opcheck(torch.ops.mslk.memory_efficient_attention_forward_with_bias.default, (q, k, v, bias))


def test_compile_wrappers_reject_mismatched_head_dims():
    q, k, v = _qkv(1, 4, 4, 2, 8, torch.float32)
    with pytest.raises(ValueError, match="head dimensions must match"):
        torch.ops.mslk.memory_efficient_attention_forward(q, k, v[..., :4])


def test_compile_wrappers_fullgraph():
    q, k, v = _qkv(1, 8, 8, 2, 16, torch.float32)
    bias = torch.randn(1, 2, 8, 8)

    def f(q, k, v, b):
        return torch.ops.mslk.memory_efficient_attention_forward(q, k, v) * 2 + \
            torch.ops.mslk.memory_efficient_attention_forward_with_bias(q, k, v, b, scale=0.25)

    got = torch.compile(f, fullgraph=True, backend="eager")(q, k, v, bias)
    torch.testing.assert_close(got, f(q, k, v, bias))


# --- trainable partial attention ----------------------------------------------------------------

def _grads(out, inputs, g):
    return torch.autograd.grad(out, inputs, g)


@pytest.mark.parametrize("bias_kind", ["none", "causal_br", "tensor"])
def test_partial_autograd_merge_matches_full_attention(bias_kind):
    # The spec's quick start (B=1, Mq=128, Mkv=1024, H=16, K=128, 2 chunks), shrunk for CPU.
    B, Mq, Mk, H, K = 1, 16, 64, 4, 16
    q, k, v = (t.requires_grad_() for t in _qkv(B, Mq, Mk, H, K))
    if bias_kind == "none":
        biases, full_bias = (None, None), None
    elif bias_kind == "causal_br":
        full = oracle.dense_mask(oracle.causal_br, Mq, Mk)
        biases = (full[:, :32].expand(B, H, Mq, 32), full[:, 32:].expand(B, H, Mq, 32))
        full_bias = full
    else:
        full = torch.randn(B, H, Mq, Mk, dtype=torch.float64)
        biases, full_bias = (full[..., :32], full[..., 32:]), full
    k0, k1 = k.split(32, dim=1)
    v0, v1 = v.split(32, dim=1)
    p0 = memory_efficient_attention_partial_autograd(q, k0, v0, biases[0])
    p1 = memory_efficient_attention_partial_autograd(q, k1, v1, biases[1])
    assert isinstance(p0, Partial) and not p0.is_bmghk()
    out = merge_attentions_autograd(p0, p1)
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    ref, _ = oracle.attention_f64(qq, kk, vv, full_bias)
    tol = 1e-5 if bias_kind == "tensor" else 1e-11  # the reference op takes tensor biases in float32
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
    g = torch.randn_like(ref)
    for a, b in zip(_grads(out, (q, k, v), g), _grads(ref, (qq, kk, vv), g)):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_partial_autograd_gradcheck_with_mask_and_lse():
    q, k, v = (t.requires_grad_() for t in _qkv(1, 5, 7, 2, 4))

    def f(q, k, v):
        p = memory_efficient_attention_partial_autograd(q, k, v, fmha.LowerTriangularFromBottomRightMask())
        return p.attn, p.lse

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_merge_gradcheck_three_shards_with_masked_shard():
    q, k, v = (t.requires_grad_() for t in _qkv(1, 6, 9, 2, 4))

    def f(q, k, v):
        parts = [memory_efficient_attention_partial_autograd(q, k[:, i:i + 3], v[:, i:i + 3],
                                                             fmha.LowerTriangularMask() if i == 6 else None)
                 for i in (0, 3, 6)]
        return merge_attentions_autograd(*parts)

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_partial_autograd_float32_bf16_and_bmghk():
    q, k, v = (t.requires_grad_() for t in _qkv(1, 8, 16, 2, 8, torch.bfloat16))
    p0 = memory_efficient_attention_partial_autograd(q, k[:, :8], v[:, :8])
    p1 = memory_efficient_attention_partial_autograd(q, k[:, 8:], v[:, 8:])
    out = merge_attentions_autograd(p0, p1)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert q.grad.dtype == torch.bfloat16 and k.grad.shape == k.shape
    ref, _ = oracle.attention_f64(q.detach(), k.detach(), v.detach())
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    # BMGHK [B, M, G, H, K]
    q5, k5, v5 = (t.reshape(1, t.shape[1], 2, 1, 4).requires_grad_() for t in _qkv(1, 4, 6, 2, 4))
    p = memory_efficient_attention_partial_autograd(q5, k5[:, :3], v5[:, :3])
    assert p.is_bmghk() and p.lse.shape == (1, 4, 2, 1, 1)
    out5 = merge_attentions_autograd(p, memory_efficient_attention_partial_autograd(q5, k5[:, 3:], v5[:, 3:]))
    g = torch.randn_like(out5)
    got = _grads(out5, (q5, k5, v5), g)
    qq, kk, vv = (t.detach().reshape(1, t.shape[1], 2, 4).requires_grad_() for t in (q5, k5, v5))
    ref, _ = oracle.attention_f64(qq, kk, vv)
    exp = _grads(ref, (qq, kk, vv), g.reshape(ref.shape))
    for a, b in zip(got, exp):
        torch.testing.assert_close(a.reshape(b.shape), b)


def test_partial_single_apply_and_errors():
    q, k, v = (t.requires_grad_() for t in _qkv(2, 4, 4, 2, 4))
    p = memory_efficient_attention_partial_autograd(q, k, v)
    out = merge_attentions_autograd(p)
    ref, _ = oracle.attention_f64(q.detach(), k.detach(), v.detach())
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    assert q.grad is not None
    sub = p.apply(lambda t: t[1:])
    assert sub.attn.shape == (1, 4, 2, 4) and sub.lse.shape == (1, 4, 2, 1)
    with pytest.raises(ValueError, match="embedding"):
        p.apply(lambda t: t[..., :1])
    with pytest.raises(ValueError):
        merge_attentions_autograd()
    with pytest.raises(NotImplementedError, match="dropout"):
        memory_efficient_attention_partial_autograd(q, k, v, p=0.1)


# --- raw backend ops -----------------------------------------------------------------------------

def _fa_bias(mq, mk, wl, wr):
    def pred(i, j, mq_, mk_):
        d = j - i - (mk_ - mq_)
        return (wl < 0 or d >= -wl) and (wr < 0 or d <= wr)
    return oracle.dense_mask(pred, mq, mk)


@pytest.mark.parametrize("causal,wl,wr", [(False, -1, -1), (True, -1, -1), (False, 3, 2), (True, 4, -1)])
def test_flash_fwd_dense(causal, wl, wr):
    q, k, v = _qkv(2, 6, 9, 4, 8, torch.float32, Hkv=2)
    out, lse, rng = torch.ops.mslk_flash.flash_fwd(q, k, v, None, None, None, 6, 9, 0.0, 0.4, causal, wl, wr,
                                                    False, None)
    bias = _fa_bias(6, 9, wl, 0 if causal else wr)
    kk, vv = k.repeat_interleave(2, dim=2), v.repeat_interleave(2, dim=2)
    ref, ref_lse = oracle.attention_f64(q, kk, vv, bias, scale=0.4)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)
    assert rng.shape == (2,) and rng.dtype == torch.int64
    out3, lse3 = torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, None, 6, 9, 0.0, 0.4, causal,
                                                 window_left=wl, window_right=wr)
    torch.testing.assert_close(out3, out)
    torch.testing.assert_close(lse3, lse)
    args = (q, k, v, None, None, None, 6, 9, 0.0, 0.4, causal, wl, wr, False, None)
    torch.library.opcheck(torch.ops.mslk_flash.flash_fwd.default, args)
    torch.library.opcheck(torch.ops.mslk_flash3.flash_fwd.default,
                          (q, k, v, None, None, None, None, 6, 9, 0.0, 0.4, causal),
                          {"window_left": wl, "window_right": wr})


def test_flash_fwd_varlen_seqused():
    H, K = 2, 8
    q_lens, k_lens, used = [3, 5, 2], [4, 6, 7], [4, 3, 7]
    g = torch.Generator().manual_seed(1)
    q = torch.randn(sum(q_lens), H, K, generator=g)
    k = torch.randn(sum(k_lens), H, K, generator=g)
    v = torch.randn(sum(k_lens), H, K, generator=g)
    cq = torch.tensor([0, 3, 8, 10], dtype=torch.int32)
    ck = torch.tensor([0, 4, 10, 17], dtype=torch.int32)
    su = torch.tensor(used, dtype=torch.int32)
    out, lse, _ = torch.ops.mslk_flash.flash_fwd(q, k, v, cq, ck, su, 5, 7, 0.0, K ** -0.5, True, -1, -1, False, None)
    assert out.shape == q.shape and lse.shape == (H, sum(q_lens))
    for b in range(3):
        qs = q[cq[b]:cq[b + 1]][None]
        ks, vs = k[ck[b]:ck[b] + used[b]][None], v[ck[b]:ck[b] + used[b]][None]
        ref, ref_lse = oracle.attention_f64(qs, ks, vs, oracle.dense_mask(oracle.causal_br, q_lens[b], used[b]))
        torch.testing.assert_close(out[cq[b]:cq[b + 1]].double(), ref[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(lse[:, cq[b]:cq[b + 1]].double(), ref_lse[0], atol=1e-5, rtol=1e-5)
    torch.library.opcheck(torch.ops.mslk_flash.flash_fwd.default,
                          (q, k, v, cq, ck, su, 5, 7, 0.0, K ** -0.5, True, -1, -1, False, None))
    out3, lse3 = torch.ops.mslk_flash3.flash_fwd(q, k, v, cq, ck, su, None, 5, 7, 0.0, K ** -0.5, True)
    torch.testing.assert_close(out3, out)


def test_flash_fwd_unsupported_and_bwd():
    q, k, v = _qkv(1, 4, 4, 2, 8, torch.float32)
    base = (q, k, v, None, None, None, 4, 4)
    with pytest.raises(NotImplementedError, match="dropout"):
        torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, None, 4, 4, 0.1, 1.0, False)
    with pytest.raises(NotImplementedError, match="dropout with paged"):
        torch.ops.mslk_flash.flash_fwd(*base, 0.1, 1.0, False, -1, -1, False, torch.zeros(1, 1, dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="paged"):
        torch.ops.mslk_flash.flash_fwd(*base, 0.0, 1.0, False, -1, -1, False, torch.zeros(1, 1, dtype=torch.int32))
    with pytest.raises(TypeError, match="descale_q/k/v need float8_e4m3fn"):  # FP8 only (test_fp8_attention.py)
        torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, None, 4, 4, 0.0, 1.0, False,
                                        descale_q=torch.ones(1, 2))
    with pytest.raises(NotImplementedError, match="paged"):
        torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, None, 4, 4, 0.0, 1.0, False,
                                        block_table=torch.zeros(1, 1, dtype=torch.int32))
    lse = torch.zeros(1, 2, 4)
    with pytest.raises(ValueError, match="dense mode"):
        torch.ops.mslk_flash3.flash_bwd(False, q[0], q[0], k[0], v[0], q[0], lse[0], None, None, 4, 4, 1.0, False,
                                        -1, -1)


def test_platform_only_ops_raise_and_have_fakes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v = _qkv(1, 4, 4, 2, 8, torch.float32)
    calls = {
        torch.ops.mslk_flash_mtia.flash_fwd: (q, k, v, None, None, None, 4, 4, 0.0, 1.0, False, -1, -1, False, None),
        torch.ops.mslk_flash_mtia.flash_bwd: (False, q, q, k, v, q, torch.zeros(1, 2, 4), None, None, 4, 4, 0.0, 1.0,
                                              False, -1, -1, torch.zeros(2, dtype=torch.int64)),
        torch.ops.xformers.efficient_attention_forward_ck: (q, k, v, None, None, None, None, 0.0, True, 0, None, None,
                                                            None, None, None),
        torch.ops.xformers.efficient_attention_backward_ck: (q, q, k, v, None, None, None, None, None, None,
                                                             torch.zeros(1, 2, 4), q, 0.0, 0, 0, 0, None, None),
        torch.ops.xformers.efficient_attention_forward_decoder_ck: (q, k, v, torch.zeros(1, dtype=torch.int32), 1.0),
        torch.ops.xformers.efficient_attention_forward_decoder_splitk_ck: (q, k, v, torch.zeros(1, dtype=torch.int32),
                                                                           1.0, 2),
        torch.ops.xformers._ck_rand_uniform: (0.1, q),
    }
    for op, args in calls.items():
        with pytest.raises(RuntimeError, match="not available on this platform"):
            op(*args)
        with FakeTensorMode() as mode:
            fargs = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            op(*fargs)


# --- standalone facades --------------------------------------------------------------------------

def test_flash_attn_func_facade():
    from mslk.attention.flash_attn import flash_attn_func

    q, k, v = _qkv(1, 5, 8, 2, 8, torch.float32)
    out, lse = flash_attn_func(q, k, v, causal=True)
    ref, ref_lse = oracle.attention_f64(q, k, v, oracle.dense_mask(oracle.causal_br, 5, 8))
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


def test_unbind_stack_views():
    from mslk.attention.fmha.unbind import get_stack_strides, stack_or_none, unbind

    x = torch.randn(3, 4, 5)
    for dim in (0, 1, 2, -1):
        parts = unbind(x, dim)
        assert get_stack_strides(parts, dim) is not None
        s = stack_or_none(parts, dim)
        assert s is not None and s.data_ptr() == x.data_ptr()
        torch.testing.assert_close(s, torch.stack(parts, dim))
    assert stack_or_none([torch.randn(2), torch.randn(2)], 0) is None
    assert get_stack_strides([], 0) is None


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stack_or_none_sends_gradients_to_every_piece(dim):
    from mslk.attention.fmha.unbind import stack_or_none, unbind

    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    s = stack_or_none(unbind(x, dim), dim)
    assert s is not None and s.data_ptr() == x.data_ptr()
    w = torch.randn(s.shape, dtype=torch.float64)
    (s * w).sum().backward()
    torch.testing.assert_close(x.grad, w)
    # pieces that are leaves of their own (one storage, equal spacing) get their own slices
    base = torch.randn(2, 6, dtype=torch.float64)
    a, b = base[0].requires_grad_(), base[1].requires_grad_()
    s = stack_or_none([a, b], 0)
    assert s is not None and s.data_ptr() == base.data_ptr()
    ga, gb = torch.autograd.grad((s * w[:2, :1, :1].reshape(2, 1)).sum(), (a, b))
    torch.testing.assert_close(ga, w[0, 0, 0].expand(6))
    torch.testing.assert_close(gb, w[1, 0, 0].expand(6))


def test_forward_with_bias_op_requires_a_bias():
    import mslk.attention.fmha.torch_attention_compat  # noqa: F401  (registers the op)
    q = torch.randn(2, 5, 3, 8)
    with pytest.raises(TypeError, match="argument 'b' must be a Tensor"):
        torch.ops.mslk.memory_efficient_attention_forward_with_bias.default(q, q, q, None)
