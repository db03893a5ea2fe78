"""torch.ops.mslk.fmha_decode_splitk over quantized K/V caches given as they are (int32 rows, with
k_scale_shift / v_scale_shift for FP8): equal to the op on the caches dequantized to q's dtype, on
the CPU and, on the GPU, for both routes of MSLK_DECODE_KV_DEQUANT: `separate` (dequantize into a
temporary, then the unquantized kernel) and `fused` (each tile dequantized inside the kernel),
which must give the same bits, and `folded` (FP8 and one-group INT4: raw values in fp16 MMAs, the
rows' scale and shift applied to scores and probabilities; the default for those caches) and
`registers` (folded FP8 read straight into mma fragments), which do not round the dequantized
values to q's dtype and must agree within the attention tolerance:
dense, ragged, paged, every format, head dims 64 / 128 / 256, fp16 / bf16, GQA and one head per
group, fixed and heuristic split counts, rows that allow 16-byte copies and rows that do not. Also
argument errors that name the argument, and opcheck."""

import pytest
import torch

from mslk.attention.fmha import quantized_kv as qkv
from mslk.attention.fmha.common import _kernel_registered
from test.attention.test_decode_quantized import _quantize as quantize
from test.attention.test_splitk_decode import rand
from test.attention.tolerance import assert_attention_close

HAS_OP = hasattr(torch.ops.mslk, "fmha_decode_splitk") and hasattr(torch.ops.mslk, "dequantize_kv_int4")
HAS_CUDA_KERNEL = HAS_OP and torch.cuda.is_available() and _kernel_registered("mslk::fmha_decode_splitk", "CUDA")
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]
# (device, MSLK_DECODE_KV_DEQUANT): the CPU backend has one route (dequantize, then the reference).
PLACES = [("cpu", None), pytest.param("cuda", "separate", marks=needs_cuda),
          pytest.param("cuda", "fused", marks=needs_cuda), pytest.param("cuda", "folded", marks=needs_cuda),
          pytest.param("cuda", "registers", marks=needs_cuda)]
FOLDING = ("folded", "registers")  # the routes that fold (registers: FP8 at d64 / d128, else folded)
FORMATS = ["int4_g1", "int4_g2", "int4_g4", "int4_g8", "fp8", "fp8_fp32"]
FOLDED = {"int4_g1", "fp8", "fp8_fp32"}  # the caches the folded route reads as they are (else: fused)


def caches(B, Mkv, Hkv, D, fmt, dtype, device, gen, scale=2.0):
    """K and V: each (int32 cache [B, Mkv, Hkv, W], scale_shift [B, Mkv, Hkv] or None, dequantized)."""
    out = []
    for _ in range(2):
        x = torch.randn((B, Mkv, Hkv, D), generator=gen) * scale + 0.3
        out.append(tuple(None if t is None else t.to(device) for t in quantize(x, fmt, dtype)))
    return out


def decode(q, k, v, kss=None, vss=None, **kw):
    return torch.ops.mslk.fmha_decode_splitk(q, k, v, k_scale_shift=kss, v_scale_shift=vss, **kw)


def assert_same(a, b):
    assert torch.equal(a[0], b[0]), (a[0].float() - b[0].float()).abs().max()
    assert torch.equal(a[1], b[1])


def exact(q, kq, vq, kss, vss, fmt, **kw):
    """The op on the CPU in float64 over the caches dequantized without rounding (float32 q * scale
    + shift): the attention the folded route computes."""
    def dq(c, ss):
        c = c.cpu().contiguous()
        if ss is None:
            return qkv.dequantize_kv_int4(c, int(fmt[-1]), torch.float32).double()
        ss = ss.cpu()[..., 0] if ss.dim() == c.dim() else ss.cpu()  # a trailing 1 as the op takes it
        return qkv.dequantize_kv_fp8(c, ss.contiguous(), torch.float32).double()
    kw = {n: x.cpu() if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    return decode(q.double().cpu(), dq(kq, kss), dq(vq, vss), **kw)


def assert_route(got, want, rt, fmt, ref=None):
    """got (the op on a quantized cache through route rt) against want (the op on the cache
    dequantized to q's dtype): the same bits, except where the folded route folds: it keeps the
    dequantized values unrounded, so it is held to the attention tolerance against ref() (exact(),
    float64), LSE within 2e-3."""
    if rt not in FOLDING or fmt not in FOLDED:
        return assert_same(got, want)
    out, lse = ref()
    assert_attention_close(got[0].cpu(), out, want[0].dtype)
    fin = torch.isfinite(lse)
    assert torch.equal(torch.isfinite(got[1].cpu()), fin)
    torch.testing.assert_close(got[1].cpu().double()[fin], lse[fin], atol=2e-3, rtol=1e-5)


def route(monkeypatch, name):
    if name is not None:
        monkeypatch.setenv("MSLK_DECODE_KV_DEQUANT", name)


# ---- the op on quantized caches equals the op on the dequantized caches --------------------------

@pytest.mark.parametrize("device,rt", PLACES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("splits", [0, 1, 3])
def test_dense_gqa(device, fmt, D, dtype, splits, rt, monkeypatch):
    route(monkeypatch, rt)
    g = torch.Generator().manual_seed(D + FORMATS.index(fmt))
    B, Mq, Hkv, R, Mkv = 2, 1, 2, 4, 333  # keys not a multiple of any tile
    q = rand((B, Mq, Hkv, R, D), dtype, device, g)
    (kq, kss, kd), (vq, vss, vd) = caches(B, Mkv, Hkv, D, fmt, dtype, device, g)
    kw = dict(num_splits=splits, scale=D ** -0.5)
    got = decode(q, kq, vq, kss, vss, **kw)
    want = decode(q, kd, vd, **kw)
    assert got[0].shape == (B, Mq, Hkv, R, D)
    assert_route(got, want, rt, fmt, lambda: exact(q, kq, vq, kss, vss, fmt, **kw))


@pytest.mark.parametrize("device,rt", PLACES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_ragged_causal_multi_query(device, fmt, rt, monkeypatch):
    route(monkeypatch, rt)
    g = torch.Generator().manual_seed(11 + FORMATS.index(fmt))
    D, Hkv, R, mq, pad = 128, 2, 8, 3, 200
    lens = [3, 1, 150, 200, 37]
    n = len(lens)
    q = rand((1, n * mq, Hkv, R, D), torch.bfloat16, device, g)
    (kq, kss, kd), (vq, vss, vd) = caches(1, n * pad, Hkv, D, fmt, torch.bfloat16, device, g)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=device)  # noqa: E731
    desc = dict(seqstart_q=i32([i * mq for i in range(n + 1)]), seqstart_k=i32([i * pad for i in range(n + 1)]),
                seqlen_k=i32(lens), max_seqlen_q=mq, mask_kind=2, scale=0.1, num_splits=2)
    assert_route(decode(q, kq, vq, kss, vss, **desc), decode(q, kd, vd, **desc), rt, fmt,
                 lambda: exact(q, kq, vq, kss, vss, fmt, **desc))


@pytest.mark.parametrize("device,rt", PLACES)
@pytest.mark.parametrize("fmt", ["int4_g1", "int4_g4", "fp8", "fp8_fp32"])
@pytest.mark.parametrize("page_size", [16, 64])
def test_paged(device, fmt, page_size, rt, monkeypatch):
    route(monkeypatch, rt)
    g = torch.Generator().manual_seed(21 + page_size)
    D, Hkv, R = 64, 2, 4
    lens = [1, 70, 129]
    n, pages = len(lens), -(-max(lens) // page_size)
    pool_pages = n * pages + 3
    q = rand((1, n, Hkv, R, D), torch.float16, device, g)
    (kq, kss, kd), (vq, vss, vd) = caches(1, pool_pages * page_size, Hkv, D, fmt, torch.float16, device, g)
    bt = torch.randperm(pool_pages, generator=g)[: n * pages].reshape(n, pages).to(torch.int32).to(device)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=device)  # noqa: E731
    # Paged lanes: seqstart_k is each lane's first key within its own pages.
    desc = dict(seqstart_q=i32(list(range(n + 1))), seqstart_k=i32([0] * (n + 1)), seqlen_k=i32(lens), max_seqlen_q=1, mask_kind=2, block_tables=bt, page_size=page_size, num_splits=3)
    assert_route(decode(q, kq, vq, kss, vss, **desc), decode(q, kd, vd, **desc), rt, fmt,
                 lambda: exact(q, kq, vq, kss, vss, fmt, **desc))


@pytest.mark.parametrize("device,rt", PLACES)
@pytest.mark.parametrize("fmt", ["int4_g2", "fp8"])
def test_strided_caches_and_trailing_scale_dim(device, fmt, rt, monkeypatch):
    # K/V heads interleaved in one buffer (strided rows), scale/shift with a trailing 1, one head a group.
    route(monkeypatch, rt)
    g = torch.Generator().manual_seed(31)
    D, Hkv, Mkv = 128, 3, 90
    q = rand((2, 2, Hkv, 1, D), torch.bfloat16, device, g)
    x = torch.randn((2, Mkv, Hkv, 2, D), generator=g)
    xq, ss, xd = (None if t is None else t.to(device) for t in quantize(x, fmt, torch.bfloat16))
    kq, vq = xq[:, :, :, 0], xq[:, :, :, 1]
    kss = None if ss is None else ss[:, :, :, 0:1]
    vss = None if ss is None else ss[:, :, :, 1:2]
    got = decode(q, kq, vq, kss, vss, mask_kind=1, scale=0.2)
    assert_route(got, decode(q, xd[:, :, :, 0], xd[:, :, :, 1], mask_kind=1, scale=0.2), rt, fmt,
                 lambda: exact(q, kq, vq, kss, vss, fmt, mask_kind=1, scale=0.2))


@needs_cuda
@pytest.mark.parametrize("rt", ["fused", *FOLDING])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("D", [64, 128, 256])
def test_long_cache(fmt, D, rt, monkeypatch):
    # Many key tiles per warp (the ring wraps many times) at the heuristic split count: fused gives
    # separate's bits, folded is held to float64 where it folds (assert_route).
    g = torch.Generator().manual_seed(41 + D)
    q = rand((2, 1, 2, 8, D), torch.bfloat16, "cuda", g)
    (kq, kss, _), (vq, vss, _) = caches(2, 5000, 2, D, fmt, torch.bfloat16, "cuda", g)
    route(monkeypatch, "separate")
    want = decode(q, kq, vq, kss, vss, scale=D ** -0.5)
    route(monkeypatch, rt)
    assert_route(decode(q, kq, vq, kss, vss, scale=D ** -0.5), want, rt, fmt,
                 lambda: exact(q, kq, vq, kss, vss, fmt, scale=D ** -0.5))


@needs_cuda
@pytest.mark.parametrize("fmt", sorted(FOLDED))
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("row", ["2", "3"])
@pytest.mark.parametrize("rt", FOLDING)
def test_folded_tile_rows(fmt, D, paged, row, rt, monkeypatch):
    # The folded kernel's two tile rows up to d128: 3 (its default: three CTAs an SM, a two-stage
    # ring; the fused kernel refuses it) and 2 (the table's), dense and paged, against float64; the
    # registers route on row 2 for FP8 (row 3 runs the folded kernel).
    route(monkeypatch, rt)
    monkeypatch.setenv("MSLK_DECODE_TILE_CFG", row)
    g = torch.Generator().manual_seed(81 + D + paged)
    lens, Hkv, R, page_size = [1, 700, 129], 2, 4, 64
    n = len(lens)
    q = rand((1, n, Hkv, R, D), torch.bfloat16, "cuda", g)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device="cuda")  # noqa: E731
    pages = -(-max(lens) // page_size)
    rows = (n * pages + 1) * page_size if paged else n * 704
    (kq, kss, kd), (vq, vss, vd) = caches(1, rows, Hkv, D, fmt, torch.bfloat16, "cuda", g)
    desc = dict(seqstart_q=i32(list(range(n + 1))), seqlen_k=i32(lens), max_seqlen_q=1, mask_kind=2, scale=D ** -0.5)
    if paged:
        bt = torch.randperm(n * pages + 1, generator=g)[: n * pages].reshape(n, pages).to(torch.int32).cuda()
        desc.update(seqstart_k=i32([0] * (n + 1)), block_tables=bt, page_size=page_size)
    else:
        desc.update(seqstart_k=i32([i * 704 for i in range(n + 1)]))
    assert_route(decode(q, kq, vq, kss, vss, **desc), decode(q, kd, vd, **desc), rt, fmt,
                 lambda: exact(q, kq, vq, kss, vss, fmt, **desc))


@needs_cuda
@pytest.mark.parametrize("fmt", sorted(FOLDED))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rt", FOLDING)
def test_folded_extreme_scales(fmt, dtype, rt, monkeypatch):
    # What the folded kernel's power-of-two bookkeeping must survive: query rows whose largest |q|
    # runs from 1e-3 to 3e4 (fp16 tops out at 65504; each row is scaled into range) and one all-zero
    # row; V rows whose scales span 2^-6 .. 2^6, growing along the keys (each warp raises its V
    # exponent and rescales O mid-stream); K rows small enough that the scores stay within a few
    # units (with scores of 100 and V rows of 2^12, a float32 rounding of a score moves the output
    # by more than the tolerance in any kernel).
    g = torch.Generator().manual_seed(71)
    B, Mkv, Hkv, R, D = 1, 700, 2, 8, 128
    q = torch.randn((B, 1, Hkv, R, D), generator=g)
    q = q / q.abs().amax(-1, keepdim=True) * torch.logspace(-3, 4.5, R).reshape(1, 1, 1, R, 1)
    q[0, 0, 1, 0] = 0
    q = q.to(dtype).cuda()
    grow = {"k": torch.exp2(torch.linspace(-15, -13, Mkv)), "v": torch.exp2(torch.linspace(-6, 6, Mkv))}
    cs = []
    for name in ("k", "v"):
        x = (torch.randn((B, Mkv, Hkv, D), generator=g) + 0.5) * grow[name].reshape(1, Mkv, 1, 1)
        xq, ss, _ = quantize(x, fmt, torch.float32)
        cs.append((xq.cuda(), None if ss is None else ss.cuda()))
    (kq, kss), (vq, vss) = cs
    route(monkeypatch, rt)
    out, lse = decode(q, kq, vq, kss, vss, scale=0.05, num_splits=3)
    want, want_lse = exact(q, kq, vq, kss, vss, fmt, scale=0.05, num_splits=3)
    assert_attention_close(out.cpu(), want, dtype)
    torch.testing.assert_close(lse.cpu().double(), want_lse, atol=2e-3, rtol=1e-5)


@needs_cuda
def test_fused_cuda_graph_replay(monkeypatch):
    route(monkeypatch, "fused")
    g = torch.Generator().manual_seed(51)
    q = rand((1, 1, 2, 4, 128), torch.bfloat16, "cuda", g)
    (kq, _, kd), (vq, _, vd) = caches(1, 3000, 2, 128, "int4_g4", torch.bfloat16, "cuda", g)
    decode(q, kq, vq)  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = decode(q, kq, vq)
    q.copy_(rand(q.shape, torch.bfloat16, "cuda", g))
    graph.replay()
    assert_same((out, lse), decode(q, kd, vd))


# ---- errors and opcheck -------------------------------------------------------------------------

def _small(device="cpu", fmt="fp8"):
    g = torch.Generator().manual_seed(1)
    q = rand((1, 1, 2, 2, 64), torch.float16, device, g)
    (kq, kss, _), (vq, vss, _) = caches(1, 9, 2, 64, fmt, torch.float16, device, g)
    return q, kq, vq, kss, vss


def test_errors_name_the_argument():
    q, kq, vq, kss, vss = _small()
    with pytest.raises(ValueError, match="'k_scale_shift' and 'v_scale_shift'"):
        decode(q, kq, vq, kss, None)
    with pytest.raises(ValueError, match="'v_scale_shift'"):
        decode(q, kq, vq, kss, vss[:, :3])
    with pytest.raises(TypeError, match="'k_scale_shift'"):
        decode(q, kq, vq, kss.to(torch.int16), vss)
    with pytest.raises(TypeError, match="share a dtype"):
        decode(q, kq, vq, kss, vss.view(torch.float32))
    with pytest.raises(ValueError, match="FP8 cache 'k'"):
        decode(q, kq[..., :8], vq[..., :8], kss, vss)
    with pytest.raises(TypeError, match="'v'"):
        decode(q, kq, vq.float(), kss, vss)
    with pytest.raises(ValueError, match="one shape"):
        decode(q, kq, vq[:, :5], kss, vss)
    q4, k4, v4, _, _ = _small(fmt="int4_g2")
    with pytest.raises(ValueError, match="INT4 cache 'k'"):
        decode(q4, k4[..., :-1].contiguous()[..., :7], v4[..., :7])  # 64 // 8 - 1: no group count fits
    with pytest.raises(ValueError, match="head counts"):
        decode(q4[:, :, :1], k4, v4)


@needs_cuda
def test_bad_route_value(monkeypatch):
    q, kq, vq, kss, vss = _small("cuda")
    route(monkeypatch, "inline")
    with pytest.raises(ValueError, match="MSLK_DECODE_KV_DEQUANT"):
        decode(q, kq, vq, kss, vss)


@needs_cuda
def test_fused_refuses_a_forced_tile_row(monkeypatch):
    # The fused kernel has the table's row only (so both routes give the same bits).
    q, kq, vq, kss, vss = _small("cuda")
    route(monkeypatch, "fused")
    monkeypatch.setenv("MSLK_DECODE_TILE_CFG", "0")  # head dim 64 runs row 2
    with pytest.raises(ValueError, match="MSLK_DECODE_TILE_CFG=0"):
        decode(q, kq, vq, kss, vss)
    monkeypatch.setenv("MSLK_DECODE_TILE_CFG", "2")
    route(monkeypatch, "separate")
    want = decode(q, kq, vq, kss, vss)
    route(monkeypatch, "fused")
    assert_same(decode(q, kq, vq, kss, vss), want)


@needs_cuda
def test_fused_refuses_int4_groups_under_eight(monkeypatch):
    # D 32 in 8 groups: 4 elements a group; the fused kernel takes 8 at a time. The separate route serves it.
    g = torch.Generator().manual_seed(2)
    q = rand((1, 1, 2, 2, 32), torch.float16, "cuda", g)
    (kq, _, kd), (vq, _, vd) = caches(1, 40, 2, 32, "int4_g8", torch.float16, "cuda", g)
    route(monkeypatch, "fused")
    with pytest.raises(ValueError, match="INT4 groups"):
        decode(q, kq, vq)
    route(monkeypatch, "separate")
    assert_same(decode(q, kq, vq), decode(q, kd, vd))


@needs_cuda
def test_auto_route(monkeypatch):
    # Unset (auto): the folded kernel for FP8 and one-group INT4, the fused one for other INT4, so the
    # bits are theirs; where neither applies (INT4 groups under 8 elements, a forced tile row they
    # lack), the separate route, with no error.
    for fmt in ("int4_g1", "int4_g2"):
        q, kq, vq, kss, vss = _small("cuda", fmt)
        route(monkeypatch, "folded" if fmt in FOLDED else "fused")
        want = decode(q, kq, vq)
        monkeypatch.delenv("MSLK_DECODE_KV_DEQUANT")
        assert_same(decode(q, kq, vq), want)
    q, kq, vq, kss, vss = _small("cuda")
    route(monkeypatch, "folded")
    want = decode(q, kq, vq, kss, vss)
    monkeypatch.delenv("MSLK_DECODE_KV_DEQUANT")
    assert_same(decode(q, kq, vq, kss, vss), want)
    route(monkeypatch, "auto")
    assert_same(decode(q, kq, vq, kss, vss), want)
    monkeypatch.setenv("MSLK_DECODE_TILE_CFG", "0")
    got = decode(q, kq, vq, kss, vss)
    route(monkeypatch, "separate")
    assert_same(got, decode(q, kq, vq, kss, vss))
    monkeypatch.delenv("MSLK_DECODE_TILE_CFG")
    g = torch.Generator().manual_seed(3)
    q = rand((1, 1, 2, 2, 32), torch.float16, "cuda", g)
    (kq, _, kd), (vq, _, vd) = caches(1, 40, 2, 32, "int4_g8", torch.float16, "cuda", g)
    route(monkeypatch, "auto")
    assert_same(decode(q, kq, vq), decode(q, kd, vd))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["int4_g4", "fp8", "fp8_fp32"])
def test_opcheck(device, fmt):
    q, kq, vq, kss, vss = _small(device, fmt)
    torch.library.opcheck(torch.ops.mslk.fmha_decode_splitk.default, (q, kq, vq),
                          {"num_splits": 2, "scale": 0.3, "k_scale_shift": kss, "v_scale_shift": vss})
