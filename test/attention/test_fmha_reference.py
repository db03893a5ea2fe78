"""The reference forward (mslk::fmha_reference_fwd through mslk.attention.fmha) against float64
attention written independently (explicit softmax, materialized mask), for every mask class and
layout; merge_attentions; input errors; operator classes and dispatch; opcheck and compile."""

import math

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha.common import _kernel_registered
from test.attention.oracle import attention_f64

TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2),
       torch.float64: (1e-10, 1e-10)}


def rand(shape, dtype=torch.float32):
    return torch.randn(shape, dtype=torch.float64).to(dtype)


def check(q, k, v, bias, out, lse=None, scale=None, dense=None):
    """Compare (out, lse) with the float64 oracle; q/k/v 4-D BMHK."""
    if dense is None:
        dense = None if bias is None else (bias if isinstance(bias, torch.Tensor)
                                           else bias.materialize((q.shape[1], k.shape[1]), torch.float64))
    want, want_lse = attention_f64(q, k, v, dense, scale)
    rtol, atol = TOL[q.dtype]
    torch.testing.assert_close(out.double(), want, rtol=rtol, atol=atol)
    if lse is not None:
        assert lse.shape == want_lse.shape
        finite = torch.isfinite(want_lse)
        assert torch.equal(torch.isneginf(lse), torch.isneginf(want_lse))
        torch.testing.assert_close(lse.double()[finite], want_lse[finite], rtol=1e-5, atol=1e-5)


DENSE_BIASES = [
    None, ab.LowerTriangularMask(), ab.LowerTriangularFromBottomRightMask(),
    ab.LowerTriangularFromBottomRightLocalAttentionMask(4), ab.LocalAttentionFromBottomRightMask(3, 2),
]


@pytest.mark.parametrize("bias", DENSE_BIASES, ids=lambda b: type(b).__name__)
@pytest.mark.parametrize("mq,mkv", [(1, 1), (7, 7), (7, 127), (127, 7), (127, 127)])
def test_dense_masks_bmhk(bias, mq, mkv):
    q, k, v = rand((2, mq, 3, 16)), rand((2, mkv, 3, 16)), rand((2, mkv, 3, 24))
    out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias)
    assert out.shape == (2, mq, 3, 24) and out.dtype == q.dtype
    assert lse.shape == (2, 3, mq) and lse.dtype == torch.float32
    check(q, k, v, bias, out, lse)
    torch.testing.assert_close(fmha.memory_efficient_attention(q, k, v, bias), out)
    torch.testing.assert_close(fmha.memory_efficient_attention_forward(q, k, v, bias), out)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtypes_scale_output_dtype(dtype):
    q, k, v = rand((1, 9, 2, 8), dtype), rand((1, 11, 2, 8), dtype), rand((1, 11, 2, 8), dtype)
    out = fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularMask(), scale=0.3)
    assert out.dtype == dtype
    check(q, k, v, ab.LowerTriangularMask(), out, scale=0.3)
    out32 = fmha.memory_efficient_attention(q, k, v, output_dtype=torch.float32)
    assert out32.dtype == torch.float32
    want, _ = attention_f64(q, k, v)
    torch.testing.assert_close(out32.double(), want, rtol=max(TOL[dtype][0], 2e-5), atol=max(TOL[dtype][1], 2e-5))


def test_tensor_bias_and_causal_with_tensor_bias():
    q, k, v = rand((2, 7, 3, 16)), rand((2, 10, 3, 16)), rand((2, 10, 3, 16))
    b = rand((2, 3, 7, 10))
    check(q, k, v, b, fmha.memory_efficient_attention(q, k, v, b))
    b_bcast = rand((1, 3, 1, 10)).expand(2, 3, 7, 10)  # broadcast / stride-0 bias
    check(q, k, v, b_bcast, fmha.memory_efficient_attention(q, k, v, b_bcast))
    m = ab.LowerTriangularMask().add_bias(b)
    check(q, k, v, None, fmha.memory_efficient_attention(q, k, v, m), dense=m.materialize((2, 3, 7, 10)))


@pytest.mark.parametrize("m", [1, 7, 127, 1000])
def test_layouts_and_lengths(m):
    # BMK
    q, k, v = rand((3, m, 8)), rand((3, m, 8)), rand((3, m, 8))
    out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v, ab.LowerTriangularMask())
    assert out.shape == (3, m, 8) and lse.shape == (3, 1, m)
    check(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2), ab.LowerTriangularMask(), out.unsqueeze(2), lse)
    # BMHK with non-contiguous (transposed) q and expanded (stride-0 heads) K/V
    qt = rand((2, 4, m, 16)).transpose(1, 2)
    kx = rand((2, m, 1, 16)).expand(2, m, 4, 16)
    vx = rand((2, m, 1, 16)).expand(2, m, 4, 16)
    out = fmha.memory_efficient_attention(qt, kx, vx, ab.LowerTriangularFromBottomRightMask())
    check(qt, kx, vx, ab.LowerTriangularFromBottomRightMask(), out)


@pytest.mark.parametrize("bias", [None, ab.LowerTriangularMask(), ab.LocalAttentionFromBottomRightMask(5, 0)],
                         ids=lambda b: type(b).__name__)
def test_bmghk_gqa(bias):
    B, M, N, G, H, K = 2, 7, 127, 2, 3, 16
    q = rand((B, M, G, H, K))
    k = rand((B, N, G, 1, K)).expand(B, N, G, H, K)  # GQA: K/V heads expanded explicitly
    v = rand((B, N, G, 1, 8)).expand(B, N, G, H, 8)
    out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias)
    assert out.shape == (B, M, G, H, 8) and lse.shape == (B, G, H, M)
    check(q.reshape(B, M, G * H, K), k.reshape(B, N, G * H, K), v.reshape(B, N, G * H, 8), bias,
          out.reshape(B, M, G * H, 8), lse.reshape(B, G * H, M))
    tb = rand((B, G, H, M, N))
    out = fmha.memory_efficient_attention(q, k, v, tb)
    check(q.reshape(B, M, G * H, K), k.reshape(B, N, G * H, K), v.reshape(B, N, G * H, 8),
          tb.reshape(B, G * H, M, N), out.reshape(B, M, G * H, 8))


def varlen_cases():
    ql = [0, 1, 300, 5, 17]  # empty and very unequal sequences
    kl = [3, 0, 310, 5, 40]
    bt = torch.tensor([[3, 0], [1, 5], [2, 4]], dtype=torch.int32)
    bd = ab.BlockDiagonalMask.from_seqlens(ql, kl)
    return [
        (bd, sum(ql), sum(kl)),
        (ab.BlockDiagonalMask.from_seqlens(ql), sum(ql), sum(ql)),
        (ab.BlockDiagonalCausalMask.from_seqlens(ql, kl), sum(ql), sum(kl)),
        (ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([0, 1, 300, 5, 17], [3, 1, 310, 5, 40]), 323, 359),
        (bd.make_local_attention(7), sum(ql), sum(kl)),
        (ab.BlockDiagonalMask.from_seqlens([2, 30], [5, 31]).make_local_attention_from_bottomright(9), 32, 36),
        (ab.BlockDiagonalCausalLocalAttentionFromBottomRightMask(
            ab.BlockDiagonalMask.from_seqlens([2, 30], [5, 31]).q_seqinfo,
            ab.BlockDiagonalMask.from_seqlens([2, 30], [5, 31]).k_seqinfo, None, 9), 32, 36),
        (ab.BlockDiagonalPaddedKeysMask.from_seqlens([1, 0, 6], 16, [10, 4, 0]), 7, 48),
        (ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1, 2, 6], 16, [10, 4, 16]), 9, 48),
        (ab.BlockDiagonalLocalAttentionPaddedKeysMask.from_seqlens_local([1, 2, 6], 16, [10, 4, 16], 3, 1), 9, 48),
        (ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask.from_seqlens_local([1, 2, 6], 16, [10, 4, 16], 3), 9,
         48),
        (ab.BlockDiagonalGappyKeysMask.from_seqlens([3, 1], [5, 0, 30], [7, 25]), 4, 30),
        (ab.BlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens([3, 1], [5, 0, 30], [7, 25]), 4, 30),
        (ab.BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask.from_seqlens_local_gappy(
            [3, 1], [5, 0, 30], [7, 25], 2, 1), 4, 30),
        (ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([2, 1, 3], [5, 8, 1], bt, 4), 6, 24),
        (ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([2, 1, 3], [5, 8, 3], bt, 4), 6, 24),
        (ab.PagedBlockDiagonalCausalLocalPaddedKeysMask.from_seqlens_local([2, 1, 3], [5, 8, 3], bt, 4, 2), 6, 24),
        (ab.PagedBlockDiagonalGappyKeysMask.from_seqlens([2, 1, 3], [1, 0, 2, 8], [5, 8, 6], bt, 4), 6, 24),
        (ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens([2, 1, 3], [1, 0, 2, 8], [5, 8, 6], bt,
                                                                          4), 6, 24),
    ]


@pytest.mark.parametrize("idx", range(19))
def test_varlen_masks(idx):
    bias, mq, mkv = varlen_cases()[idx]
    q, k, v = rand((1, mq, 2, 16)), rand((1, mkv, 2, 16)), rand((1, mkv, 2, 8))
    out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias)
    assert lse.shape == (1, 2, mq)  # packed varlen LSE
    check(q, k, v, bias, out, lse)
    qg, kg, vg = q.reshape(1, mq, 1, 2, 16), k.reshape(1, mkv, 1, 2, 16), v.reshape(1, mkv, 1, 2, 8)
    outg = fmha.memory_efficient_attention(qg, kg, vg, bias)
    torch.testing.assert_close(outg.reshape(out.shape), out)


def test_fully_masked_rows_give_zero_and_neg_inf_lse():
    bias = ab.BlockDiagonalPaddedKeysMask.from_seqlens([2, 3], 4, [0, 2])  # first sequence sees no key
    q, k, v = rand((1, 5, 1, 8)), rand((1, 8, 1, 8)), rand((1, 8, 1, 8))
    out, lse = fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias)
    assert torch.equal(out[0, :2], torch.zeros_like(out[0, :2]))
    assert torch.isneginf(lse[0, 0, :2]).all() and torch.isfinite(lse[0, 0, 2:]).all()
    check(q, k, v, bias, out, lse)


@pytest.mark.parametrize("layout", ["bmhk", "bmghk"])
def test_merge_attentions_equals_full(layout):
    B, M, H, K = 2, 33, 3, 16
    chunks = [5, 40, 1, 20]
    shape = (B, M, 2, H, K) if layout == "bmghk" else (B, M, H, K)
    kvshape = lambda n: (B, n, *shape[2:])  # noqa: E731
    q = rand(shape)
    ks = [rand(kvshape(n)) for n in chunks]
    vs = [rand(kvshape(n)) for n in chunks]
    outs, lses = [], []
    for k, v in zip(ks, vs):
        o_, l_ = fmha.memory_efficient_attention_partial(q, k, v)
        assert o_.dtype == torch.float32
        outs.append(o_)
        lses.append(l_)
    full, full_lse = fmha.memory_efficient_attention_forward_requires_grad(q, torch.cat(ks, 1), torch.cat(vs, 1))
    merged, mlse = fmha.merge_attentions(outs, lses)
    torch.testing.assert_close(merged, full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mlse, full_lse, rtol=1e-5, atol=1e-5)
    merged2, none = fmha.merge_attentions(torch.stack(outs), torch.stack(lses), write_lse=False,
                                          output_dtype=torch.bfloat16)
    assert none is None and merged2.dtype == torch.bfloat16
    torch.testing.assert_close(merged2.float(), full, rtol=1e-2, atol=1e-2)


def test_merge_attentions_all_masked_chunks():
    B, M, H, K = 1, 4, 2, 8
    attn = rand((3, B, M, H, K))
    lse = rand((3, B, H, M)).float()
    lse[:, :, 0, 1] = -math.inf  # every chunk masked for (head 0, query 1)
    lse[1, :, 1, :] = -math.inf  # one chunk masked for head 1
    out, mlse = fmha.merge_attentions(attn, lse)
    assert torch.equal(out[0, 1, 0], torch.zeros(K))
    assert torch.isneginf(mlse[0, 0, 1]) and torch.isfinite(mlse[0, 1]).all()
    w = torch.softmax(torch.stack([lse[0], lse[2]]).double()[:, 0, 1], dim=0)  # [2, M]
    want = (w.unsqueeze(-1) * torch.stack([attn[0], attn[2]]).double()[:, 0, :, 1]).sum(0)
    torch.testing.assert_close(out[0, :, 1].double(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        fmha.merge_attentions(attn, lse[:, :, :, :3])


def test_merge_partial_with_masks():
    # causal from bottom-right attention split into two K/V chunks equals the unsplit one
    q, k, v = rand((1, 6, 2, 8)), rand((1, 20, 2, 8)), rand((1, 20, 2, 8))
    full_bias = ab.LowerTriangularFromBottomRightMask().materialize((6, 20))
    o1, l1 = fmha.memory_efficient_attention_partial(q, k[:, :12], v[:, :12], full_bias[:, :12].contiguous())
    o2, l2 = fmha.memory_efficient_attention_partial(q, k[:, 12:], v[:, 12:], full_bias[:, 12:].contiguous())
    merged, _ = fmha.merge_attentions([o1, o2], [l1, l2])
    want = fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularFromBottomRightMask())
    torch.testing.assert_close(merged, want, rtol=1e-5, atol=1e-5)


def test_input_errors():
    q, k, v = rand((2, 5, 3, 8)), rand((2, 6, 3, 8)), rand((2, 6, 3, 8))
    mea = fmha.memory_efficient_attention
    with pytest.raises(ValueError, match="3-D"):
        mea(rand((5, 8)), rand((5, 8)), rand((5, 8)))
    with pytest.raises(ValueError, match="same rank"):
        mea(q, k[:, :, 0], v)
    with pytest.raises(ValueError, match="Batch"):
        mea(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="sequence length"):
        mea(q, k, v[:, :5])
    with pytest.raises(ValueError, match="Head"):
        mea(q, k[:, :, :1], v[:, :, :1])  # heads are never broadcast
    with pytest.raises(ValueError, match="embedding"):
        mea(q, rand((2, 6, 3, 4)), v)
    with pytest.raises(ValueError, match="stride 1"):
        mea(q, rand((2, 6, 3, 16))[..., ::2], v)
    with pytest.raises(ValueError, match="dtype"):
        mea(q, k.half(), v)
    with pytest.raises(ValueError, match="broadcast"):
        mea(q, k, v, rand((2, 3, 5, 7)))
    with pytest.raises(ValueError, match="query.shape\\[0\\] == 1"):
        mea(q, k, v, ab.BlockDiagonalMask.from_seqlens([5], [6]))
    with pytest.raises(ValueError, match="total"):
        mea(q[:1], k[:1], v[:1], ab.BlockDiagonalMask.from_seqlens([4], [6]))
    with pytest.raises(ValueError, match="dropout"):
        mea(q, k, v, p=1.5)
    with pytest.raises(NotImplementedError):
        fmha.memory_efficient_attention_forward_requires_grad(q, k, v, p=0.1)
    with pytest.raises(NotImplementedError):
        fmha.memory_efficient_attention_partial(q, k, v, p=0.1)
    with pytest.raises(ValueError, match="not an"):
        fmha.memory_efficient_attention_forward(q, k, v, op=fmha.MemoryEfficientAttentionCutlassOp)
    with pytest.raises(ValueError, match="backward"):  # a pinned backward that cannot take the inputs
        mea(q.requires_grad_(), k, v, op=(None, fmha.flash.BwOp))


def test_pinned_unsupported_op_lists_reasons():
    q, k, v = rand((1, 5, 2, 8)), rand((1, 6, 2, 8)), rand((1, 6, 2, 8))
    with pytest.raises(ValueError) as e:
        fmha.memory_efficient_attention(q, k, v, op=fmha.MemoryEfficientAttentionFlashAttentionOp)
    msg = str(e.value)
    assert "fa2F" in msg and "device=cpu" in msg and "dtype=torch.float32" in msg
    assert ("not available" in msg) == (not fmha.flash.FwOp.is_available())
    with pytest.raises(ValueError, match="dropout > 0.0"):
        fmha.memory_efficient_attention(q, k, v, p=0.2, op=(fmha.flash3.FwOp, None))
    inp = fmha.Inputs(q.half(), k.half(), rand((1, 6, 2, 24)).half())
    assert "query.shape[-1] != value.shape[-1]" in fmha.flash.FwOp.not_supported_reasons(inp)
    assert any("not in [64, 128, 192, 256]" in r for r in fmha.flash3.FwOp.not_supported_reasons(inp))
    assert fmha.reference.FwOp.not_supported_reasons(inp) == []


def test_platform_backends_state_the_spec_limits():
    # backends of absent hardware cannot run here, but their reasons follow the spec's constraints
    from mslk.attention.fmha import ck, cute_blackwell
    from mslk.attention.fmha.common import Inputs

    def reasons(op, K, Kv=None, dtype=torch.float16):
        q = torch.zeros(1, 4, 2, K, dtype=torch.float16)
        v = torch.zeros(1, 4, 2, K if Kv is None else Kv, dtype=torch.float16)
        return op.not_supported_reasons(Inputs(q.to(dtype), q.to(dtype), v.to(dtype)))

    assert any("> 256" in r for r in reasons(ck.FwOp, 512))  # ck: head dims up to 256
    assert not any("shape" in r or "embed" in r for r in reasons(ck.FwOp, 128, 64))  # different V dim
    assert ck.FwOp.SUPPORTS_PARTIAL and ck.FwOp.SUPPORTS_BMGHK and ck.FwOp.SUPPORTS_DROPOUT
    # cute_blackwell prefill: FP16, BF16 and FP8 E4M3, head dims 64 / 96 / 128
    assert not any("dtype" in r for r in reasons(cute_blackwell.FwOp, 128, dtype=torch.float8_e4m3fn))
    assert not any("embed_dim" in r for r in reasons(cute_blackwell.FwOp, 96))
    assert any("embed_dim" in r for r in reasons(cute_blackwell.FwOp, 80))


def test_operator_classes_and_dispatch():
    from mslk.attention.fmha import (ck, ck_decoder, ck_splitk, cute_blackwell, cute_hopper, cutlass,
                                     cutlass_blackwell, dispatch, flash, flash3, flash_mtia, reference,
                                     triton_splitk)
    hw = [ck.FwOp, ck.BwOp, ck_decoder.FwOp, ck_splitk.FwOp, cute_hopper.FwOp,
          cute_blackwell.FwOp, cute_blackwell.BwOp, cutlass_blackwell.FwOp, cutlass_blackwell.BwOp, flash_mtia.FwOp,
          flash_mtia.BwOp, ck_splitk.FwOp_S1, ck_splitk.FwOp_S128]
    for op in hw:
        assert not op.is_available(), op
    # the split-K decode op (mslk::fmha_decode_splitk) backs triton_splitk
    decode = hasattr(torch.ops.mslk, "fmha_decode_splitk") and _kernel_registered("mslk::fmha_decode_splitk", "CUDA")
    assert all(op.is_available() == decode for op in (triton_splitk.FwOp, *triton_splitk.FwOp_Map.values(),
                                                       cute_blackwell.FwOpDecode, cutlass_blackwell.FwOpDecode))
    # the fused CUDA forward (mslk::fmha_fused_fwd) backs cutlass / flash (and flash3 on sm_90 GPUs)
    fused = hasattr(torch.ops.mslk, "fmha_fused_fwd") and _kernel_registered("mslk::fmha_fused_fwd", "CUDA")
    sm90 = torch.cuda.is_available() and any(torch.cuda.get_device_capability(i) == (9, 0)
                                             for i in range(torch.cuda.device_count()))
    assert cutlass.FwOp.is_available() == fused and flash.FwOp.is_available() == fused
    assert flash3.FwOp.is_available() == flash3.FwOp_KVSplit.is_available() == (fused and sm90)
    # the fused backward (mslk::fmha_fused_bwd) backs cutlass / flash (and flash3 / cute_hopper on sm_90)
    fused_bw = hasattr(torch.ops.mslk, "fmha_fused_bwd") and _kernel_registered("mslk::fmha_fused_bwd", "CUDA")
    assert cutlass.BwOp.is_available() == flash.BwOp.is_available() == fused_bw
    assert flash3.BwOp.is_available() == cute_hopper.BwOp.is_available() == (fused_bw and sm90)
    for op in (*hw, cutlass.FwOp, flash.FwOp, flash3.FwOp, flash3.FwOp_KVSplit, cutlass.BwOp, flash.BwOp,
               flash3.BwOp, cute_hopper.BwOp, reference.BwOp):
        for attr in ("SUPPORTED_DTYPES", "SUPPORTED_MAX_K", "SUPPORTED_ATTN_BIAS_TYPES", "SUPPORTS_DROPOUT",
                     "NAME", "SUPPORTED_DEVICES"):
            assert hasattr(op, attr)
    assert cutlass.BwOp.SUPPORTED_MAX_K == 65536 and flash.FwOp.SUPPORTED_MAX_K == 256
    assert cutlass.FwOp.SUPPORTED_MAX_K == 65536 and torch.float32 in cutlass.FwOp.SUPPORTED_DTYPES
    assert sorted(triton_splitk.FwOp_Map) == [1, 2, 4, 8, 16, 32, 48, 64, 72, 80, 96, 112, 128]
    assert triton_splitk.FwOp_S16.NUM_SPLITS == 16 and triton_splitk.FwOp_Map[48].NUM_SPLITS == 48
    assert reference.FwOp.is_available()
    assert fmha.MemoryEfficientAttentionCkDecoderOp == (ck_decoder.FwOp, ck.BwOp)
    assert fmha.MemoryEfficientAttentionCuteFlashAttentionOp == (cute_blackwell.FwOp, cute_blackwell.BwOp)
    assert reference.FwOp in fmha.ALL_FW_OPS and flash3.BwOp in fmha.ALL_BW_OPS
    q = rand((1, 4, 2, 64)).half()
    for use_fa3 in (True, False):
        fmha._set_use_fa3(use_fa3)
        assert fmha._get_use_fa3() is use_fa3
        assert dispatch._dispatch_fw(fmha.Inputs(q, q, q), False) is reference.FwOp
    fmha._set_use_fa3(True)
    assert fmha.fa3_available() is flash3.FwOp.is_available()


def test_context_padded_lse_and_helpers():
    lse = rand((1, 2, 5)).float()
    ctx = fmha.Context(lse=lse, out=rand((1, 5, 2, 4)))
    p = ctx.get_padded_lse(8)
    assert p.shape == (1, 2, 8) and torch.equal(p[..., :5], lse) and torch.isposinf(p[..., 5:]).all()
    from mslk.attention.fmha.common import bmghk2bmhk, bmk2bmhk, check_lastdim_alignment_stride1
    x = rand((6, 7, 8))  # [B*H, M, K], H=3
    y = bmk2bmhk(x, 3)
    assert y.shape == (2, 7, 3, 8) and torch.equal(y[1, :, 2], x[5])
    g = rand((2, 7, 2, 3, 8))
    assert bmghk2bmhk(g)[0].shape == (2, 7, 6, 8)
    reasons = []
    check_lastdim_alignment_stride1(reasons, "query", rand((2, 7, 12))[..., ::2], 8)
    assert any("stride(-1)" in r for r in reasons) and any("% 8" in r for r in reasons)


def op_cases():
    q, k, v = rand((2, 7, 3, 16)), rand((2, 9, 3, 16)), rand((2, 9, 3, 8))
    b = ab.LowerTriangularFromBottomRightMask().materialize((7, 9))
    return [
        (q, k, v, None, 0.25, None),
        (q.half(), k.half(), v.half(), b, 0.5, torch.float32),
        (q.bfloat16(), k.bfloat16(), v.bfloat16(), rand((2, 3, 7, 9)), 1.0, None),
    ]


def test_opcheck_native_op():
    for args in op_cases():
        torch.library.opcheck(torch.ops.mslk.fmha_reference_fwd.default, args)


def test_torch_compile_fullgraph_native_op():
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(q, k, v, b):
        out, lse = torch.ops.mslk.fmha_reference_fwd(q, k, v, b, 0.25, torch.float32)
        return out * 2, lse

    q, k, v = rand((2, 7, 3, 16)), rand((2, 9, 3, 16)), rand((2, 9, 3, 8))
    b = ab.LowerTriangularMask().materialize((7, 9))
    out, lse = f(q.half(), k.half(), v.half(), b)
    want, want_lse = torch.ops.mslk.fmha_reference_fwd(q.half(), k.half(), v.half(), b, 0.25, torch.float32)
    torch.testing.assert_close(out, want * 2)
    torch.testing.assert_close(lse, want_lse)
