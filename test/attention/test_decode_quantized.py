"""Split-K decode (triton_splitk.FwOp) over quantized K/V caches: INT4 with 1 / 2 / 4 / 8 groups a
row and FP8 rowwise with fp16 scale/shift pairs or float32 scales, against float64 attention on the
dequantized cache; the cache makers' round trips (mslk.attention.fmha.quantized_kv); the
dequantize ops (torch.ops.mslk.dequantize_kv_int4 / _fp8) against the torch dequantizers, their
argument errors and opcheck. CPU cases run the operator class's apply (the classes declare CUDA
only); CUDA cases (needs_cuda) go through the public API."""

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import quantized_kv as qkv
from mslk.attention.fmha import triton_splitk
from mslk.attention.fmha.common import Inputs, InputsFp8, _kernel_registered
from test.attention.test_splitk_decode import KV_LENS, PAD, rand, reference
from test.attention.tolerance import assert_attention_close

HAS_OP = hasattr(torch.ops.mslk, "dequantize_kv_int4") and hasattr(torch.ops.mslk, "fmha_decode_splitk")
HAS_CUDA_KERNEL = (HAS_OP and torch.cuda.is_available() and _kernel_registered("mslk::dequantize_kv_int4", "CUDA")
                   and _kernel_registered("mslk::fmha_decode_splitk", "CUDA"))
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]
FORMATS = ["int4_g1", "int4_g2", "int4_g4", "int4_g8", "fp8", "fp8_fp32"]
# Read as they are by the CUDA kernel's default (folded) route, which does not round the dequantized
# values to q's dtype: its reference is attention over the float32-dequantized cache.
FOLDED = {"int4_g1", "fp8", "fp8_fp32"}


def ref_dtype(device, fmt, dtype):
    """The dtype of the dequantized cache that the op's result on `device` is attention over."""
    return torch.float32 if str(device).startswith("cuda") and fmt in FOLDED else dtype


# ---- cache makers -----------------------------------------------------------------------------

@pytest.mark.parametrize("groups", [1, 2, 4, 8])
@pytest.mark.parametrize("D", [64, 128])
def test_int4_round_trip(groups, D):
    k = torch.randn(3, 7, 2, D, generator=torch.Generator().manual_seed(D + groups)) * 3
    kq = qkv.quantize_kv_int4(k, groups)
    assert kq.dtype == torch.int32 and kq.shape == (3, 7, 2, D // 8 + groups)
    assert qkv.int4_num_groups(D, kq.shape[-1]) == groups
    x = k.reshape(3, 7, 2, groups, D // groups)
    step = (x.amax(-1, keepdim=True) - x.amin(-1, keepdim=True)) / 15  # one quantization step a group
    err = (qkv.dequantize_kv_int4(kq, groups) - k).abs().reshape(x.shape)
    assert bool((err <= 0.5 * step * 1.01 + 2e-3 * x.abs().amax(-1, keepdim=True)).all()), err.max()


@pytest.mark.parametrize("fp32_scales", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_fp8_round_trip(fp32_scales, D):
    k = torch.randn(3, 7, 2, D, generator=torch.Generator().manual_seed(D + fp32_scales)) * 3 + 1
    kq, ss = qkv.quantize_kv_fp8(k, use_fp32_scales=fp32_scales)
    assert kq.dtype == torch.int32 and kq.shape == (3, 7, 2, D // 4) and ss.shape == (3, 7, 2)
    assert ss.dtype == (torch.float32 if fp32_scales else torch.int32)
    # E4M3 keeps 3 mantissa bits: a relative error of at most 2^-4 of the element's distance from
    # the row's shift, plus the subnormal step and fp16 rounding of scale and shift.
    span = (k - k.mean(-1, keepdim=True)).abs().amax(-1, keepdim=True) + k.abs().amax(-1, keepdim=True)
    err = (qkv.dequantize_kv_fp8(kq, ss) - k).abs()
    assert bool((err <= span * (2 ** -4 + 2e-3)).all()), err.max()


def test_makers_refuse_bad_arguments():
    with pytest.raises(ValueError, match="num_groups"):
        qkv.quantize_kv_int4(torch.randn(2, 64), 3)
    with pytest.raises(ValueError, match="'k'"):
        qkv.quantize_kv_int4(torch.randn(2, 60), 1)
    with pytest.raises(TypeError, match="'k'"):
        qkv.quantize_kv_fp8(torch.ones(2, 64, dtype=torch.int32))


# ---- the dequantize ops -----------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_dequantize_op_matches_torch(device, fmt, dtype):
    k = torch.randn(2, 9, 3, 128, generator=torch.Generator().manual_seed(1)) * 2
    kq, ss, ref = _quantize(k, fmt, dtype)
    out = _dequant_op(kq.to(device), None if ss is None else ss.to(device), fmt, dtype)
    assert out.dtype == dtype and out.shape == k.shape
    assert torch.equal(out.cpu(), ref)  # one float32 rounding of q * scale + shift, then the cast


@pytest.mark.parametrize("device", DEVICES)
def test_dequantize_op_strided_cache(device):
    # Rows of an expanded / sliced cache (a decode group's shared K/V head) read through their strides.
    k = torch.randn(2, 5, 3, 1, 64, generator=torch.Generator().manual_seed(2))
    kq = qkv.quantize_kv_int4(k, 2).to(device).expand(2, 5, 3, 4, 10)
    out = torch.ops.mslk.dequantize_kv_int4(kq[:, :, :, 2], 2, torch.float32)
    assert torch.equal(out.cpu(), qkv.dequantize_kv_int4(kq[:, :, :, 2].cpu(), 2))


def test_dequantize_op_errors_name_the_argument():
    kq = torch.zeros(4, 10, dtype=torch.int32)
    with pytest.raises(TypeError, match="'cache'"):
        torch.ops.mslk.dequantize_kv_int4(kq.float(), 2, torch.float16)
    with pytest.raises(ValueError, match="'num_groups'"):
        torch.ops.mslk.dequantize_kv_int4(kq, 3, torch.float16)
    with pytest.raises(ValueError, match="'cache'"):
        torch.ops.mslk.dequantize_kv_int4(kq[:, :2], 2, torch.float16)
    with pytest.raises(TypeError, match="'dtype'"):
        torch.ops.mslk.dequantize_kv_int4(kq, 2, torch.int32)
    with pytest.raises(TypeError, match="'scale_shift'"):
        torch.ops.mslk.dequantize_kv_fp8(kq, torch.zeros(4, dtype=torch.float16), torch.float16)
    with pytest.raises(ValueError, match="'scale_shift'"):
        torch.ops.mslk.dequantize_kv_fp8(kq, torch.zeros(5, dtype=torch.int32), torch.float16)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    k = torch.randn(2, 5, 3, 64, generator=torch.Generator().manual_seed(3))
    kq = qkv.quantize_kv_int4(k, 4).to(device)
    torch.library.opcheck(torch.ops.mslk.dequantize_kv_int4.default, (kq, 4, torch.bfloat16))
    for fp32 in (False, True):
        fq, ss = qkv.quantize_kv_fp8(k, use_fp32_scales=fp32)
        torch.library.opcheck(torch.ops.mslk.dequantize_kv_fp8.default, (fq.to(device), ss.to(device), torch.float16))


# ---- decode over quantized caches -------------------------------------------------------------

def _quantize(k, fmt, dtype):
    """(int32 cache, scale_shift or None, the cache dequantized to dtype by the torch helpers)."""
    if fmt.startswith("int4"):
        g = int(fmt[-1])
        kq = qkv.quantize_kv_int4(k, g)
        return kq, None, qkv.dequantize_kv_int4(kq, g, dtype)
    kq, ss = qkv.quantize_kv_fp8(k, use_fp32_scales=fmt == "fp8_fp32")
    return kq, ss, qkv.dequantize_kv_fp8(kq, ss, dtype)


def _dequant_op(kq, ss, fmt, dtype):
    if ss is None:
        return torch.ops.mslk.dequantize_kv_int4(kq, int(fmt[-1]), dtype)
    return torch.ops.mslk.dequantize_kv_fp8(kq, ss, dtype)


def quantized_gqa(B, Mq, Mkv, Hkv, R, D, dtype, device, fmt, gen):
    """q [B, Mq, Hkv, R, D]; quantized K/V [B, Mkv, Hkv, R, W] expanded over R (BMGHK), their
    scale/shift [B, Mkv, Hkv, R] (FP8) and the dequantized K/V (in ref_dtype)."""
    q = rand((B, Mq, Hkv, R, D), dtype, device, gen)
    out = []
    for _ in range(2):
        x = torch.randn((B, Mkv, Hkv, 1, D), generator=gen)
        xq, ss, xd = _quantize(x, fmt, ref_dtype(device, fmt, dtype))
        ex = lambda t: None if t is None else t.to(device).expand(*t.shape[:3], R, *t.shape[4:])  # noqa: E731
        out.append((ex(xq), ex(ss), ex(xd)))
    return q, out[0], out[1]


def run(op, q, k, v, bias=None, k_ss=None, v_ss=None, fp32_scales=False, partial=True):
    """(out, lse): the public API on CUDA (InputsFp8 through fmha._run_forward for FP8), op.apply on the CPU."""
    if k_ss is not None:
        inp = InputsFp8(query=q, key=k, value=v, attn_bias=bias, is_partial=partial, use_fp32_scales=fp32_scales,
                        k_fp8_scale_shift=k_ss, v_fp8_scale_shift=v_ss)
    else:
        inp = Inputs(query=q, key=k, value=v, attn_bias=bias, is_partial=partial)
    if q.is_cuda:
        if k_ss is None:
            return fmha.memory_efficient_attention_partial(q, k, v, bias, op=op)
        out, ctx = fmha._run_forward(inp, op, needs_gradient=True)
        return out, ctx.lse
    inp.validate_inputs()
    shape = inp.normalize_bmhk()
    assert not op.not_supported_reasons(inp) or not q.is_cuda
    out, ctx = op.apply(inp, needs_gradient=True)
    return out.reshape(shape), ctx.lse


def check(op, q, kv, bias):
    (kq, kss, kd), (vq, vss, vd) = kv
    fmt_fp32 = kss is not None and kss.dtype == torch.float32
    out, lse = run(op, q, kq, vq, bias, kss, vss, fmt_fp32)
    ref_out, ref_lse = reference(q, kd, vd, bias)
    assert out.shape == ref_out.shape
    assert_attention_close(out, ref_out, q.dtype)
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.cpu()), fin)
    torch.testing.assert_close(lse.double().cpu()[fin], ref_lse[fin], atol=2e-3, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_decode_ragged_gqa(device, fmt, D, dtype):
    g = torch.Generator().manual_seed(D + FORMATS.index(fmt))
    mq, n = 2, len(KV_LENS)
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([mq] * n, PAD, [max(x, mq) for x in KV_LENS],
                                                                        device=device)
    q, kv_k, kv_v = quantized_gqa(1, n * mq, n * PAD, 2, 4, D, dtype, device, fmt, g)
    check(triton_splitk.FwOp, q, (kv_k, kv_v), bias)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["int4_g4", "fp8", "fp8_fp32"])
def test_decode_head_dim_512(device, fmt):
    # the spec's largest head dim: on the GPU the cache is dequantized to q's dtype, then the exact
    # path (the CPU backend's rule: the reference dequantizes to q's dtype too)
    g = torch.Generator().manual_seed(512 + FORMATS.index(fmt))
    q, kv_k, kv_v = quantized_gqa(2, 2, 300, 2, 4, 512, torch.bfloat16, "cpu", fmt, g)
    shared = lambda t: None if t is None else t[:, :, :, :1].to(device).expand(t.shape)  # noqa: E731
    kv = [(shared(xq), shared(ss), xd) for xq, ss, xd in (kv_k, kv_v)]
    check(triton_splitk.FwOp, q.to(device), kv, ab.LowerTriangularFromBottomRightMask())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["int4_g2", "fp8"])
@pytest.mark.parametrize("op", [triton_splitk.FwOp_S1, triton_splitk.FwOp_S8])
def test_decode_dense_fixed_splits(device, fmt, op):
    g = torch.Generator().manual_seed(5)
    q, kv_k, kv_v = quantized_gqa(2, 1, 150, 2, 8, 128, torch.bfloat16, device, fmt, g)
    check(op, q, (kv_k, kv_v), None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["int4_g4", "fp8_fp32"])
def test_decode_bmhk_heads_not_shared(device, fmt):
    # BMHK with one K/V row set per head (no expand): every head is its own group.
    g = torch.Generator().manual_seed(6)
    q = rand((2, 1, 3, 64), torch.float16, device, g)
    kv = []
    for _ in range(2):
        xq, ss, xd = _quantize(torch.randn((2, 70, 3, 64), generator=g), fmt, ref_dtype(device, fmt, torch.float16))
        kv.append((xq.to(device), None if ss is None else ss.to(device), xd.to(device)))
    check(triton_splitk.FwOp, q, kv, ab.LowerTriangularFromBottomRightMask())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["int4_g1", "int4_g8", "fp8", "fp8_fp32"])
def test_paged_equals_contiguous(device, fmt):
    g = torch.Generator().manual_seed(7)
    page_size, lens, mq, R, Hkv, D = 16, [1, 19, 48], 1, 4, 2, 128
    pages = -(-max(lens) // page_size)
    n, pad = len(lens), pages * page_size
    q, (kq, kss, kd), (vq, vss, vd) = quantized_gqa(1, n * mq, n * pad, Hkv, R, D, torch.bfloat16, device, fmt, g)
    padded = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([mq] * n, pad, lens, device=device)
    perm = torch.randperm(n * pages + 2, generator=g)
    bt = perm[: n * pages].reshape(n, pages).to(torch.int32)

    def page(x):  # [1, n * pad, Hkv, R, ...] -> the physical pool, pages shuffled, head 0 expanded over R
        if x is None:
            return None
        x1 = x[:, :, :, :1]
        pool = torch.zeros((1, (n * pages + 2) * page_size, *x1.shape[2:]), dtype=x.dtype, device=device)
        for b in range(n):
            for p in range(pages):
                dst = int(bt[b, p]) * page_size
                pool[:, dst:dst + page_size] = x1[:, b * pad + p * page_size: b * pad + (p + 1) * page_size]
        return pool.expand(*pool.shape[:3], R, *pool.shape[4:])

    paged = ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([mq] * n, lens, bt.to(device),
                                                                            page_size, device=device)
    fp32 = kss is not None and kss.dtype == torch.float32
    out_c, lse_c = run(triton_splitk.FwOp, q, kq, vq, padded, kss, vss, fp32)
    out_p, lse_p = run(triton_splitk.FwOp, q, page(kq), page(vq), paged, page(kss), page(vss), fp32)
    assert_attention_close(out_p, reference(q, kd, vd, padded)[0], torch.bfloat16)
    torch.testing.assert_close(lse_p, lse_c, atol=1e-4, rtol=1e-5)
    check(triton_splitk.FwOp, q, ((kq, kss, kd), (vq, vss, vd)), padded)


# ---- refusals ---------------------------------------------------------------------------------

def _int4_inputs(D=64, groups=2, **kw):
    q = torch.randn(1, 1, 4, D, dtype=torch.float16)
    kq = qkv.quantize_kv_int4(torch.randn(1, 9, 4, D), groups)
    return Inputs(q, kq, kq.clone(), **kw)


def test_not_supported_reasons_name_the_argument():
    reasons = triton_splitk.FwOp.not_supported_reasons
    assert not [r for r in reasons(_int4_inputs()) if "quantized" in r or "INT4" in r or "key" in r]
    d = _int4_inputs()
    d.key, d.value = d.key[..., :-1].contiguous(), d.value[..., :-1].contiguous()  # 64 // 8 + 1: fine, 1 group
    assert not [r for r in reasons(d) if "INT4" in r]
    d.key, d.value = torch.zeros(1, 9, 4, 11, dtype=torch.int32), torch.zeros(1, 9, 4, 11, dtype=torch.int32)
    assert any("key last dim 11" in r for r in reasons(d))  # 3 groups
    pinned = type("FwOp_G4", (triton_splitk.FwOp,), {"NUM_GROUPS": 4})
    assert any("NUM_GROUPS" in r for r in pinned.not_supported_reasons(_int4_inputs(groups=2)))
    q = torch.randn(1, 1, 4, 64, dtype=torch.float16)
    fq, ss = qkv.quantize_kv_fp8(torch.randn(1, 9, 4, 64))
    assert not [r for r in reasons(InputsFp8(q, fq, fq, k_fp8_scale_shift=ss, v_fp8_scale_shift=ss))
                if "FP8" in r]
    assert any("v_fp8_scale_shift" in r for r in reasons(InputsFp8(q, fq, fq, k_fp8_scale_shift=ss)))
    assert any("k_fp8_scale_shift" in r and "use_fp32_scales" in r
               for r in reasons(InputsFp8(q, fq, fq, use_fp32_scales=True, k_fp8_scale_shift=ss,
                                          v_fp8_scale_shift=ss.float())))
    assert any("k_fp8_scale_shift" in r for r in reasons(InputsFp8(q, fq, fq, k_fp8_scale_shift=ss[:, :3],
                                                                   v_fp8_scale_shift=ss)))
    fq2 = fq[..., :8].contiguous()
    assert any("FP8 K/V: key last dim 8" in r for r in reasons(InputsFp8(q, fq2, fq2, k_fp8_scale_shift=ss,
                                                                         v_fp8_scale_shift=ss)))
    assert any("FP8 queries" in r for r in reasons(InputsFp8(q, q, q, q_fp8_scale_shift=ss)))


def test_wrong_cache_dtype_refused():
    q = torch.randn(1, 1, 4, 64, dtype=torch.float16)
    kq = qkv.quantize_kv_int4(torch.randn(1, 9, 4, 64), 2)
    with pytest.raises(ValueError, match="dtype"):
        Inputs(q, kq, kq.to(torch.int16)).validate_inputs()
    assert any("quantized" in r for r in fmha.reference.FwOp.not_supported_reasons(Inputs(q, kq, kq)))
    with pytest.raises((ValueError, NotImplementedError)):  # nothing on the CPU serves a quantized cache
        fmha.memory_efficient_attention_forward(q, kq, kq)


# ---- CUDA only ----------------------------------------------------------------------------------

@needs_cuda
def test_public_forward_int4_cuda():
    g = torch.Generator().manual_seed(9)
    q, (kq, _, kd), (vq, _, vd) = quantized_gqa(2, 1, 300, 2, 4, 128, torch.bfloat16, "cuda", "int4_g4", g)
    out = fmha.memory_efficient_attention_forward(q, kq, vq, op=triton_splitk.FwOp)
    ref = fmha.memory_efficient_attention_forward(q, kd, vd, op=triton_splitk.FwOp)
    assert out.shape == q.shape
    torch.testing.assert_close(out, ref, atol=0, rtol=0)  # the same op on the same dequantized values


@needs_cuda
def test_dispatch_picks_splitk_for_quantized_cache():
    g = torch.Generator().manual_seed(10)
    q, (kq, _, _), (vq, _, _) = quantized_gqa(1, 1, 64, 2, 4, 64, torch.float16, "cuda", "int4_g8", g)
    out = fmha.memory_efficient_attention_forward(q, kq, vq)  # only triton_splitk.FwOp reads int32 K/V
    torch.testing.assert_close(out, fmha.memory_efficient_attention_forward(q, kq, vq, op=triton_splitk.FwOp),
                               atol=0, rtol=0)
