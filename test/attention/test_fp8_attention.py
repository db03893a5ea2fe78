"""FP8 attention forward: flash3.FwOp on float8_e4m3fn ScaledTensor q / k / v
(common.pack_fp8_tensorwise_per_head) and torch.ops.mslk_flash3.flash_fwd with descale_q / k / v,
against float64 attention on the operands dequantized to the output dtype (the documented
semantics: dtype(float(x) * descale) per batch or sequence and head); the dequantization op
(torch.ops.mslk.fmha_fp8_dequant) against its formula; refusals that name what is wrong; opcheck.
CPU cases run the operator class's apply and the raw op's reference path; CUDA cases (needs_cuda)
go through the public API and the fused kernel."""

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import flash3
from mslk.attention.fmha.common import Inputs, pack_fp8_tensorwise_per_head
from test.attention import oracle as o
from test.attention.tolerance import assert_attention_close

HAS_OP = hasattr(torch.ops.mslk, "fmha_fp8_dequant") and hasattr(torch.ops.mslk, "fmha_fused_fwd")
needs_cuda = pytest.mark.skipif(not (HAS_OP and flash3.FwOp.is_available()),
                                reason="needs a Hopper GPU and a CUDA build of mslk")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]
E4M3 = torch.float8_e4m3fn
# torch's SchemaCheckMode cannot compare FP8 inputs: opcheck without its schema test.
NO_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def quantize(x, per_head_dims):
    """(FP8 data, descale) of x [B, M, *heads, K]: one descale per batch and head (amax / 448)."""
    amax = x.abs().amax(dim=(1, x.ndim - 1)).clamp_min(1e-6)  # [B, *heads]
    s = (amax / 448.0).float()
    shape = (x.shape[0], 1, *x.shape[2:-1], 1)
    return (x / s.reshape(shape)).to(E4M3), s


def dequant(data, s, dtype=torch.bfloat16):
    """The documented rule, written independently of the op: dtype(float32(x) * descale)."""
    return (data.float() * s.reshape(data.shape[0], 1, *data.shape[2:-1], 1)).to(dtype)


def operands(shape, device, gen, dtype=torch.bfloat16, scales=(1.0, 3.0, 0.5)):
    """FP8 ScaledTensors q, k, v of `shape` and their dequantized values in dtype."""
    out, ref = [], []
    for sc in scales:
        x = torch.randn(shape, generator=gen) * sc
        data, s = quantize(x, shape[2:-1])
        out.append(pack_fp8_tensorwise_per_head(data.to(device), s.to(device), dtype))
        ref.append(dequant(data, s, dtype))
    return out, ref


def reference(q, k, v, bias=None, scale=None):
    flat = lambda x: x.reshape(x.shape[0], x.shape[1], -1, x.shape[-1]).double().cpu()  # noqa: E731
    qf, kf, vf = flat(q), flat(k), flat(v)
    dense = None if bias is None else bias.materialize((qf.shape[1], kf.shape[1]), torch.float64, torch.device("cpu"))
    out, _ = o.attention_f64(qf, kf, vf, dense, scale)
    return out.reshape(*q.shape[:-1], v.shape[-1])


def run(op, q, k, v, bias=None):
    if q.is_cuda:
        return fmha.memory_efficient_attention_forward(q, k, v, bias, op=op)
    inp = Inputs(q, k, v, attn_bias=bias)
    inp.validate_inputs()
    shape = inp.normalize_bmhk()
    return op.apply(inp, needs_gradient=False)[0].reshape(shape)


# ---- the dequantization op --------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_dequant_op_formula(device, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 9, 4, 32, generator=g) * 50).to(E4M3)
    d = torch.rand(2, 4, generator=g) + 0.01
    got = torch.ops.mslk.fmha_fp8_dequant(x.to(device), d.to(device), dtype)
    assert got.dtype == dtype and torch.equal(got.cpu(), dequant(x, d, dtype))
    # one descale per K/V head for 4 query heads in 2 groups (FlashAttention 3's layout), and a scalar
    dg = torch.rand(2, 2, generator=g) + 0.5
    got = torch.ops.mslk.fmha_fp8_dequant(x.to(device), dg.to(device), dtype)
    assert torch.equal(got.cpu(), dequant(x, dg.repeat_interleave(2, 1), dtype))
    got = torch.ops.mslk.fmha_fp8_dequant(x.to(device), torch.tensor(0.25, device=device), dtype)
    assert torch.equal(got.cpu(), (x.float() * 0.25).to(dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_dequant_op_per_sequence(device):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(1, 10, 3, 16, generator=g) * 9).to(E4M3)
    d = torch.rand(3, 3, generator=g) + 0.5
    seqstart = torch.tensor([0, 4, 4, 10], dtype=torch.int32)  # an empty sequence in the middle
    got = torch.ops.mslk.fmha_fp8_dequant(x.to(device), d.to(device), torch.float32, seqstart.to(device)).cpu()
    torch.testing.assert_close(got[0, :4], x[0, :4].float() * d[0][:, None], atol=0, rtol=0)
    torch.testing.assert_close(got[0, 4:], x[0, 4:].float() * d[2][:, None], atol=0, rtol=0)


def test_dequant_op_errors_name_the_argument():
    x = torch.zeros(2, 3, 4, 8).to(E4M3)
    op = torch.ops.mslk.fmha_fp8_dequant
    with pytest.raises(TypeError, match="'x'"):
        op(x.float(), torch.ones(2, 4), torch.bfloat16)
    with pytest.raises(ValueError, match="'descale'"):
        op(x, torch.ones(3, 4), torch.bfloat16)
    with pytest.raises(ValueError, match="'descale'"):
        op(x, torch.ones(2, 3), torch.bfloat16)  # 3 does not divide 4 heads
    with pytest.raises(TypeError, match="'dtype'"):
        op(x, torch.ones(2, 4), torch.int32)
    with pytest.raises(ValueError, match="'seqstart'"):
        op(x, torch.ones(2, 4), torch.bfloat16, torch.tensor([0, 3], dtype=torch.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_dequant_op_opcheck(device):
    x = (torch.randn(2, 5, 4, 16) * 3).to(E4M3).to(device)
    torch.library.opcheck(torch.ops.mslk.fmha_fp8_dequant.default, (x, torch.rand(2, 4, device=device),
                                                                    torch.bfloat16), test_utils=NO_SCHEMA)
    torch.library.opcheck(torch.ops.mslk.fmha_fp8_dequant.default, (x[:1], torch.rand(2, 4, device=device),
                                                                    torch.float16),
                          {"seqstart": torch.tensor([0, 2, 5], dtype=torch.int32, device=device)},
                          test_utils=NO_SCHEMA)


# ---- flash3.FwOp on ScaledTensor operands -----------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("K", [64, 128])
@pytest.mark.parametrize("mask", [None, ab.LowerTriangularMask(), ab.LowerTriangularFromBottomRightMask()])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_flash3_fp8_bmhk(device, K, mask, dtype):
    g = torch.Generator().manual_seed(K)
    (q, k, v), (qd, kd, vd) = operands((2, 77, 3, K), device, g, dtype)
    out = run(flash3.FwOp, q, k, v, mask)
    assert out.dtype == dtype and out.shape == (2, 77, 3, K)
    assert_attention_close(out.cpu(), reference(qd, kd, vd, mask), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_flash3_fp8_bmghk_expanded_kv(device):
    g = torch.Generator().manual_seed(3)
    B, M, G, H, K = 2, 40, 2, 4, 64
    q, qd = operands((B, M, G, H, K), device, g, scales=(1.0,))
    q, qd = q[0], qd[0]
    kv, ref = [], []
    for sc in (2.0, 0.7):
        x = torch.randn(B, M, G, 1, K, generator=g) * sc
        data, s = quantize(x, (G, 1))
        data, s = data.expand(B, M, G, H, K), s.expand(B, G, H)  # one K/V head a group, one descale
        kv.append(pack_fp8_tensorwise_per_head(data.to(device), s.to(device), torch.bfloat16))
        ref.append(dequant(data, s))
    out = run(flash3.FwOp, q, *kv, ab.LowerTriangularMask())
    assert_attention_close(out.cpu(), reference(qd, *ref, ab.LowerTriangularMask()), torch.bfloat16)


@pytest.mark.parametrize("device", DEVICES)
def test_flash3_fp8_varlen(device):
    g = torch.Generator().manual_seed(4)
    lens = [5, 1, 60]
    (q, k, v), (qd, kd, vd) = operands((1, sum(lens), 2, 128), device, g)
    mask = ab.BlockDiagonalCausalMask.from_seqlens(lens, device=device)
    out = run(flash3.FwOp, q, k, v, mask)
    assert_attention_close(out.cpu(), reference(qd, kd, vd, mask), torch.bfloat16)


def test_flash3_fp8_refusals_name_the_problem():
    g = torch.Generator().manual_seed(5)
    (q, k, v), _ = operands((1, 8, 2, 64), "cpu", g)
    reasons = flash3.FwOp.not_supported_reasons
    plain = q.unpack()[0]
    assert any("ScaledTensor" in r and "query" in r for r in reasons(Inputs(plain, k, v)))
    e5 = pack_fp8_tensorwise_per_head(plain.float().to(torch.float8_e5m2), q.unpack()[1], torch.bfloat16)
    assert any("float8_e4m3fn" in r for r in reasons(Inputs(e5, e5, e5)))
    f32 = pack_fp8_tensorwise_per_head(plain, q.unpack()[1], torch.float32)
    assert any("original_dtype" in r for r in reasons(Inputs(f32, f32, f32)))
    half = pack_fp8_tensorwise_per_head(plain, q.unpack()[1], torch.float16)
    assert any("share original_dtype" in r for r in reasons(Inputs(q, half, v)))
    assert not [r for r in reasons(Inputs(q, k, v)) if "FP8" in r or "dtype" in r]
    assert any("dtype" in r for r in flash3.BwOp.not_supported_reasons(Inputs(q, k, v)))  # forward only


# ---- torch.ops.mslk_flash3.flash_fwd with descales ---------------------------------------------

def _raw(q, k, v, dq, dk, dv, causal=True, cu_q=None, cu_k=None, mq=0, mk=0):
    return torch.ops.mslk_flash3.flash_fwd(q, k, v, cu_q, cu_k, None, None, mq, mk, 0.0, q.shape[-1] ** -0.5,
                                           causal, descale_q=dq, descale_k=dk, descale_v=dv)


@pytest.mark.parametrize("device", DEVICES)
def test_raw_flash3_fp8_dense_gqa(device):
    g = torch.Generator().manual_seed(6)
    B, M, Hq, Hkv, K = 2, 50, 4, 2, 64
    xs = [torch.randn(B, M, h, K, generator=g) * sc for h, sc in ((Hq, 1.0), (Hkv, 2.0), (Hkv, 0.5))]
    data, desc = zip(*[quantize(x, x.shape[2:-1]) for x in xs])
    dq_kv = desc[0].reshape(B, Hkv, 2).amax(-1)  # FlashAttention 3 layout: q's descale per K/V head
    qd = dequant(data[0], dq_kv.repeat_interleave(2, 1))
    kd, vd = dequant(data[1], desc[1]), dequant(data[2], desc[2])
    out, lse = _raw(*(t.to(device) for t in data), dq_kv.to(device), desc[1].to(device), desc[2].to(device))
    assert out.dtype == torch.bfloat16 and lse.shape == (B, Hq, M)
    want = reference(qd, kd.repeat_interleave(2, 2), vd.repeat_interleave(2, 2), ab.LowerTriangularMask())
    assert_attention_close(out.cpu(), want, torch.bfloat16)


@pytest.mark.parametrize("device", DEVICES)
def test_raw_flash3_fp8_varlen_per_sequence_descales(device):
    g = torch.Generator().manual_seed(7)
    lens, H, K = [9, 30], 2, 128
    cu = torch.tensor([0, 9, 39], dtype=torch.int32)
    xs = [torch.randn(sum(lens), H, K, generator=g) * sc for sc in (1.0, 4.0, 0.25)]
    data = [(x / 2).to(E4M3) for x in xs]
    desc = [torch.rand(2, H, generator=g) + 0.5 for _ in range(3)]
    per_row = [torch.cat([d[0].expand(lens[0], H), d[1].expand(lens[1], H)]) for d in desc]
    deq = [(x.float() * s[:, :, None]).bfloat16().unsqueeze(0) for x, s in zip(data, per_row)]
    out, _ = _raw(*(t.to(device) for t in data), *(d.to(device) for d in desc), cu_q=cu.to(device),
                  cu_k=cu.to(device), mq=max(lens), mk=max(lens))
    mask = ab.BlockDiagonalCausalMask.from_seqlens(lens)
    assert_attention_close(out.cpu().unsqueeze(0), reference(*deq, mask), torch.bfloat16)


def test_raw_flash3_descale_errors():
    x = torch.zeros(1, 4, 2, 64)
    d = torch.ones(1, 2)
    with pytest.raises(TypeError, match="descale"):
        _raw(x.bfloat16(), x.bfloat16(), x.bfloat16(), d, d, d)
    with pytest.raises(TypeError, match="key"):
        _raw(x.to(E4M3), x.bfloat16(), x.to(E4M3), None, None, None)


@pytest.mark.parametrize("device", DEVICES)
def test_raw_flash3_fp8_opcheck(device):
    x = (torch.randn(1, 16, 2, 64) * 2).to(E4M3).to(device)
    d = torch.rand(1, 2, device=device) + 0.5
    torch.library.opcheck(torch.ops.mslk_flash3.flash_fwd.default,
                          (x, x, x, None, None, None, None, 16, 16, 0.0, 0.125, True),
                          {"descale_q": d, "descale_k": d, "descale_v": d}, test_utils=NO_SCHEMA)


# ---- CUDA only ----------------------------------------------------------------------------------

@needs_cuda
def test_dispatch_picks_flash3_for_fp8():
    g = torch.Generator().manual_seed(8)
    (q, k, v), (qd, kd, vd) = operands((2, 256, 4, 128), "cuda", g)
    out = fmha.memory_efficient_attention(q, k, v, ab.LowerTriangularMask())  # only flash3 reads FP8
    assert_attention_close(out.cpu(), reference(qd, kd, vd, ab.LowerTriangularMask()), torch.bfloat16)
