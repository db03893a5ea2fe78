"""Split-K decode attention (triton_splitk.FwOp, torch.ops.mslk.fmha_decode_splitk) against float64
attention: every mask it serves, ragged per-sequence key lengths, Mq 1..16, GQA ratios 1 / 4 / 8,
head dims 16 to 512, the LSE (partial + merge), every fixed split count, paged K/V equal to
contiguous K/V, argument errors, opcheck. CPU cases run the op's CPU implementation through the
operator class; CUDA cases (needs_cuda) run the kernel, including a CUDA-graph capture."""

import math

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import triton_splitk
from mslk.attention.fmha.common import Inputs, _kernel_registered
from test.attention import oracle as o
from test.attention.tolerance import assert_attention_close

HAS_OP = hasattr(torch.ops.mslk, "fmha_decode_splitk")
HAS_CUDA_KERNEL = HAS_OP and torch.cuda.is_available() and _kernel_registered("mslk::fmha_decode_splitk", "CUDA")
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]


def rand(shape, dtype, device, gen):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def gqa_qkv(B, Mq, Mkv, Hkv, R, D, dtype, device, gen, grouped=True):
    """q [B, Mq, Hkv, R, D] with K/V [B, Mkv, Hkv, 1, D] expanded over R (BMGHK), or the BMHK form
    (grouped=False: Hkv must be 1 and K/V [B, Mkv, 1, D] expanded over R heads)."""
    if grouped:
        q = rand((B, Mq, Hkv, R, D), dtype, device, gen)
        k = rand((B, Mkv, Hkv, 1, D), dtype, device, gen).expand(B, Mkv, Hkv, R, D)
        v = rand((B, Mkv, Hkv, 1, D), dtype, device, gen).expand(B, Mkv, Hkv, R, D)
    else:
        q = rand((B, Mq, R, D), dtype, device, gen)
        k = rand((B, Mkv, 1, D), dtype, device, gen).expand(B, Mkv, R, D)
        v = rand((B, Mkv, 1, D), dtype, device, gen).expand(B, Mkv, R, D)
    return q, k, v


def reference(q, k, v, bias, scale=None):
    """float64 out (q's layout) and lse ([B, (G,) H, M]) from oracle.attention_f64 on the flattened heads."""
    shape = q.shape
    flat = lambda x: x.reshape(x.shape[0], x.shape[1], -1, x.shape[-1]).double().cpu()  # noqa: E731
    qf, kf, vf = flat(q), flat(k), flat(v)
    dense = None if bias is None else bias.materialize((qf.shape[1], kf.shape[1]), torch.float64, torch.device("cpu"))
    out, lse = o.attention_f64(qf, kf, vf, dense, scale)
    return out.reshape(*shape[:-1], v.shape[-1]), lse.reshape(lse.shape[0], *shape[2:-1], lse.shape[-1])


def run(op, q, k, v, bias=None, partial=False, output_dtype=None, scale=None):
    """(out, lse) of operator class `op`: through the public API on CUDA, through op.apply on the
    CPU (the classes declare CUDA only; the op's CPU implementation is the exact reference)."""
    if q.is_cuda:
        if partial:
            return fmha.memory_efficient_attention_partial(q, k, v, bias, scale=scale, op=op, output_dtype=output_dtype)
        return fmha.memory_efficient_attention_forward_requires_grad(q, k, v, bias, scale=scale, op=op,
                                                                     output_dtype=output_dtype)
    inp = Inputs(query=q, key=k, value=v, attn_bias=bias, scale=scale, output_dtype=output_dtype, is_partial=partial)
    inp.validate_inputs()
    shape = inp.normalize_bmhk()
    out, ctx = op.apply(inp, needs_gradient=True)
    return out.reshape(shape), ctx.lse


def check(op, q, k, v, bias, scale=None):
    out, lse = run(op, q, k, v, bias, scale=scale)
    ref_out, ref_lse = reference(q, k, v, bias, scale)
    assert out.dtype == q.dtype and out.shape == ref_out.shape
    assert_attention_close(out, ref_out, q.dtype)
    assert lse.shape == ref_lse.shape, (lse.shape, ref_lse.shape)
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.cpu()), fin)
    torch.testing.assert_close(lse.double().cpu()[fin], ref_lse[fin], atol=2e-3, rtol=1e-4)


# ---- masks -----------------------------------------------------------------------------------

KV_LENS = [1, 37, 130, 64]  # ragged: 1 key, not a multiple of any tile, a tile multiple
PAD = 160


def decode_masks(mq, device):
    """(name, bias, B, Mkv) of the masks in scope; varlen masks pack B = 1 and len(KV_LENS) sequences."""
    n = len(KV_LENS)
    return [
        ("none", None, 2, 150),
        ("causal_br", ab.LowerTriangularFromBottomRightMask(), 2, 150),
        ("padded_causal", ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(
            [mq] * n, PAD, [max(x, mq) for x in KV_LENS], device=device), 1, n * PAD),
        ("padded", ab.BlockDiagonalPaddedKeysMask.from_seqlens([mq] * n, PAD, KV_LENS, device=device), 1, n * PAD),
        ("gappy", ab.BlockDiagonalGappyKeysMask.from_seqlens([mq] * 3, [0, 40, 200, 300], [33, 150, 1], device=device),
         1, 300),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mq", [1, 3, 16])
@pytest.mark.parametrize("R", [1, 4, 8])
@pytest.mark.parametrize("mask", range(5))
def test_masks(device, dtype, mq, R, mask):
    g = torch.Generator().manual_seed(mq * 100 + R * 10 + mask)
    name, bias, B, Mkv = decode_masks(mq, device)[mask]
    Mq = mq * (len(bias.q_seqinfo.seqstart_py) - 1) if hasattr(bias, "q_seqinfo") else mq
    q, k, v = gqa_qkv(B, Mq, Mkv, 2, R, 128, dtype, device, g)
    check(triton_splitk.FwOp, q, k, v, bias)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("D", [16, 64, 128, 256, 512])
@pytest.mark.parametrize("mq", [1, 16])
def test_head_dims(device, D, mq):
    g = torch.Generator().manual_seed(D + mq)
    q, k, v = gqa_qkv(3, mq, 129, 2, 4, D, torch.bfloat16, device, g)
    check(triton_splitk.FwOp, q, k, v, ab.LowerTriangularFromBottomRightMask(), scale=0.3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["bmhk_mqa", "bmhk", "bmghk_mha"])
def test_layouts(device, layout):
    g = torch.Generator().manual_seed(7)
    if layout == "bmhk_mqa":
        q, k, v = gqa_qkv(2, 2, 77, 1, 8, 64, torch.float16, device, g, grouped=False)
    elif layout == "bmhk":
        q, k, v = (rand((2, n, 6, 64), torch.float16, device, g) for n in (2, 77, 77))
    else:
        q, k, v = (rand((2, n, 2, 3, 64), torch.float16, device, g) for n in (2, 77, 77))
    check(triton_splitk.FwOp, q, k, v, None)


# ---- splits, LSE, partial + merge ------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", [0, 2])
def test_every_split_count_agrees(device, mask):
    g = torch.Generator().manual_seed(11)
    _, bias, B, Mkv = decode_masks(2, device)[mask]
    Mq = 2 * (len(bias.q_seqinfo.seqstart_py) - 1) if bias is not None else 2
    q, k, v = gqa_qkv(B, Mq, Mkv, 2, 4, 128, torch.bfloat16, device, g)
    base, base_lse = run(triton_splitk.FwOp, q, k, v, bias)
    want, _ = reference(q, k, v, bias)
    for n, op in triton_splitk.FwOp_Map.items():
        out, lse = run(op, q, k, v, bias)
        assert_attention_close(out, want, torch.bfloat16, what=f"{n} splits")
        torch.testing.assert_close(lse, base_lse, atol=1e-4, rtol=1e-5, msg=f"{n} splits")
    assert triton_splitk.FwOp.get_operator(16) is triton_splitk.FwOp_S16
    assert triton_splitk.FwOp.get_operator(3).NUM_SPLITS == 3


@pytest.mark.parametrize("device", DEVICES)
def test_partial_and_merge(device):
    g = torch.Generator().manual_seed(5)
    q, k, v = gqa_qkv(2, 4, 300, 2, 4, 128, torch.float16, device, g)
    parts = [run(triton_splitk.FwOp_S4, q, k[:, a:b], v[:, a:b], partial=True) for a, b in ((0, 77), (77, 300))]
    assert all(p[0].dtype == torch.float32 for p in parts)
    out, lse = fmha.merge_attentions([p[0] for p in parts], [p[1] for p in parts])
    ref_out, ref_lse = reference(q, k, v, None)
    assert_attention_close(out, ref_out, torch.float16)
    torch.testing.assert_close(lse.double().cpu(), ref_lse, atol=2e-3, rtol=1e-4)
    out16, _ = run(triton_splitk.FwOp, q, k, v, output_dtype=torch.float32)
    assert out16.dtype == torch.float32


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", range(5))
def test_head_dim_512(device, mask):
    # the spec's largest head dim (the GPU's exact path): every decode mask, the LSE, merging two
    # partial results, a float32 output
    g = torch.Generator().manual_seed(512 + mask)
    mq = 3
    name, bias, B, Mkv = decode_masks(mq, device)[mask]
    Mq = mq * (len(bias.q_seqinfo.seqstart_py) - 1) if hasattr(bias, "q_seqinfo") else mq
    q, k, v = gqa_qkv(B, Mq, Mkv, 2, 4, 512, torch.bfloat16, device, g)
    check(triton_splitk.FwOp, q, k, v, bias, scale=0.05)
    if bias is None:
        parts = [run(triton_splitk.FwOp, q, k[:, a:b], v[:, a:b], partial=True, scale=0.05) for a, b in ((0, 61), (61, Mkv))]
        out, lse = fmha.merge_attentions([p[0] for p in parts], [p[1] for p in parts])
        ref_out, ref_lse = reference(q, k, v, None, 0.05)
        assert_attention_close(out, ref_out, torch.bfloat16)
        torch.testing.assert_close(lse.double().cpu(), ref_lse, atol=2e-3, rtol=1e-4)
        out32, _ = run(triton_splitk.FwOp, q, k, v, output_dtype=torch.float32, scale=0.05)
        assert out32.dtype == torch.float32
        assert_attention_close(out32, ref_out, torch.bfloat16)


@needs_cuda
def test_head_dim_512_long_cache():
    # expanded K/V over 256 MB a K/V head: the GPU's exact path takes the K/V heads one call each
    g = torch.Generator().manual_seed(16384)
    q, k, v = gqa_qkv(1, 1, 16384, 2, 4, 512, torch.bfloat16, "cuda", g)
    check(triton_splitk.FwOp, q, k, v, None, scale=0.05)


@needs_cuda
def test_head_dim_512_forced_tile_row(monkeypatch):
    # a forced kernel tile row cannot take head dim 512: a clear error, not the exact path
    q, k, v = gqa_qkv(1, 1, 64, 2, 4, 512, torch.bfloat16, "cuda", torch.Generator().manual_seed(5))
    monkeypatch.setenv("MSLK_DECODE_TILE_CFG", "0")
    with pytest.raises(ValueError, match="MSLK_DECODE_TILE_CFG=0 forces a kernel tile row.*K=512"):
        run(triton_splitk.FwOp, q, k, v, scale=0.05)
    monkeypatch.delenv("MSLK_DECODE_TILE_CFG")
    check(triton_splitk.FwOp, q, k, v, None, scale=0.05)


# ---- paged K/V ---------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("page_size", [16, 64, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_paged_equals_contiguous(device, page_size, causal):
    g = torch.Generator().manual_seed(page_size + causal)
    lens, mq, R, Hkv, D = [1, page_size + 3, 3 * page_size], 2, 4, 2, 128
    pages = -(-max(lens) // page_size)
    n, pad = len(lens), pages * page_size
    lens = [max(x, mq) for x in lens]
    q, k, v = gqa_qkv(1, n * mq, n * pad, Hkv, R, D, torch.bfloat16, device, g)
    padded_t = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask if causal else ab.BlockDiagonalPaddedKeysMask
    paged_t = ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask if causal else ab.PagedBlockDiagonalPaddedKeysMask
    padded = padded_t.from_seqlens([mq] * n, pad, lens, device=device)
    # Physical pages in shuffled order (plus unused ones): page p of lane b holds keys [p * ps, + ps).
    perm = torch.randperm(n * pages + 3, generator=g)
    bt = perm[: n * pages].reshape(n, pages).to(torch.int32)
    kp = torch.zeros((1, (n * pages + 3) * page_size, Hkv, R, D), dtype=k.dtype, device=device)
    vp = torch.zeros_like(kp)
    for b in range(n):
        for p in range(pages):
            src = slice(b * pad + p * page_size, b * pad + (p + 1) * page_size)
            dst = slice(int(bt[b, p]) * page_size, (int(bt[b, p]) + 1) * page_size)
            kp[:, dst], vp[:, dst] = k[:, src], v[:, src]
    kp, vp = kp[:, :, :, :1].expand_as(kp), vp[:, :, :, :1].expand_as(vp)  # keep K/V shared over R
    paged = paged_t.from_seqlens([mq] * n, lens, bt.to(device), page_size, device=device)
    out_c, lse_c = run(triton_splitk.FwOp, q, k, v, padded)
    out_p, lse_p = run(triton_splitk.FwOp, q, kp, vp, paged)
    assert_attention_close(out_p, reference(q, k, v, padded)[0], torch.bfloat16)
    torch.testing.assert_close(lse_p, lse_c, atol=1e-4, rtol=1e-5)
    check(triton_splitk.FwOp, q, k, v, padded)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("page_size", [4, 16])
@pytest.mark.parametrize("mask", range(5))
@pytest.mark.parametrize("D", [64, 512])
def test_paged_and_gappy_masks(device, page_size, mask, D):
    """Every paged mask (padded, causal, local, gappy) over shuffled pages, against the float64
    reference operator on the same paged inputs."""
    from mslk.attention.fmha import reference as ref_op
    from test.attention.test_fmha_fwd_kernel import paged_masks

    bias = paged_masks(device, page_size)[mask]
    g = torch.Generator().manual_seed(page_size * 10 + mask)
    q, k, v = gqa_qkv(1, bias.q_seqinfo.total, 14 * page_size, 2, 4, D, torch.float16, device, g)
    scale = 0.05 if D == 512 else None
    out, lse = run(triton_splitk.FwOp, q, k, v, bias, scale=scale)
    ref_out, ref_lse = fmha.memory_efficient_attention_partial(q.cpu().double(), k.cpu().double(), v.cpu().double(),
                                                               paged_masks("cpu", page_size)[mask], op=ref_op.FwOp,
                                                               scale=scale)
    assert_attention_close(out, ref_out, torch.float16)
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.cpu()), fin)
    torch.testing.assert_close(lse.double().cpu()[fin], ref_lse[fin], atol=2e-3, rtol=1e-4)


# ---- argument checks, support reasons, opcheck -------------------------------------------------

def _args(device="cpu", dtype=torch.float16):
    g = torch.Generator().manual_seed(0)
    return (rand((2, 1, 2, 4, 64), dtype, device, g), rand((2, 33, 2, 64), dtype, device, g),
            rand((2, 33, 2, 64), dtype, device, g))


def test_bad_inputs_name_the_argument():
    q, k, v = _args()
    op = torch.ops.mslk.fmha_decode_splitk
    with pytest.raises(ValueError, match="'q'"):
        op(q[:, :, :, 0], k, v)
    with pytest.raises(ValueError, match="'k'"):
        op(q, k.unsqueeze(0), v)
    with pytest.raises(ValueError, match="num_splits"):
        op(q, k, v, num_splits=-1)
    with pytest.raises(ValueError, match="head counts"):
        op(q, k[:, :, :1], v[:, :, :1])
    with pytest.raises(TypeError, match="output_dtype"):
        op(q, k, v, output_dtype=torch.int32)
    with pytest.raises(TypeError, match="dtype"):
        op(q, k.float(), v)
    with pytest.raises(ValueError, match="seqstart_k"):
        op(q[:1], k[:1], v[:1], seqstart_q=torch.tensor([0, 1], dtype=torch.int32))


def test_not_supported_reasons():
    q = torch.randn(1, 1, 8, 320, dtype=torch.float16)
    reasons = triton_splitk.FwOp.not_supported_reasons(Inputs(q, q, q))
    assert any("320" in r for r in reasons)
    q = torch.randn(1, 1, 8, 512, dtype=torch.float16)  # the spec's largest head dim
    assert not [r for r in triton_splitk.FwOp.not_supported_reasons(Inputs(q, q, q)) if "512" in r or "head" in r]
    q = torch.randn(1, 1, 8, 64)
    assert any("dtype" in r for r in triton_splitk.FwOp.not_supported_reasons(Inputs(q, q, q)))
    assert any("dropout" in r for r in triton_splitk.FwOp.not_supported_reasons(Inputs(q.half(), q.half(), q.half(),
                                                                                       p=0.1)))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    q, k, v = _args(device)
    torch.library.opcheck(torch.ops.mslk.fmha_decode_splitk.default, (q, k, v), {"num_splits": 2, "scale": 0.2})
    lens = torch.tensor([5, 33], dtype=torch.int32, device=device)
    torch.library.opcheck(torch.ops.mslk.fmha_decode_splitk.default, (q, k, v),
                          {"seqlen_k": lens, "mask_kind": 2, "output_dtype": torch.float32})


# ---- CUDA only: dispatch, poisoned outputs, graph capture ------------------------------------

@needs_cuda
def test_dispatch_picks_decode_for_long_keys():
    from mslk.attention.fmha import dispatch

    q, k, v = gqa_qkv(2, 1, 8192, 2, 4, 128, torch.bfloat16, "cuda", torch.Generator().manual_seed(0))
    inp = Inputs(q, k, v)
    inp.normalize_bmhk()
    assert dispatch._dispatch_fw(inp, False) is triton_splitk.FwOp


@needs_cuda
@pytest.mark.parametrize("splits", [1, 3, 128])
@pytest.mark.parametrize("mask", [0, 2])  # dense and varlen (padded keys)
def test_outputs_fully_written(splits, mask):
    # NaN-filled blocks in the caching allocator: an output or workspace entry the kernels skip shows up.
    torch.full((1 << 24,), math.nan, device="cuda")
    torch.cuda.synchronize()
    g = torch.Generator().manual_seed(splits)
    _, bias, B, Mkv = decode_masks(2, "cuda")[mask]
    q, k, v = gqa_qkv(1, 8, Mkv, 2, 8, 128, torch.float16, "cuda", g)
    check(triton_splitk.FwOp_Map.get(splits) or triton_splitk.FwOp.get_operator(splits), q, k, v, bias)


def capture(fwd):
    """(graph, outputs) of fwd captured in a CUDA graph, after a warm-up call on a side stream."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fwd()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fwd()
    return graph, out


@needs_cuda
def test_cuda_graph_capture():
    g = torch.Generator().manual_seed(3)
    qv, kv, vv = gqa_qkv(1, 4, 4096, 2, 4, 128, torch.bfloat16, "cuda", g)
    bias = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1] * 4, 1024, [1, 500, 1024, 77],
                                                                       device="cuda")
    fwd = lambda: fmha.memory_efficient_attention_forward(qv, kv, vv, bias, op=triton_splitk.FwOp)  # noqa: E731
    graph, out = capture(fwd)
    qv.copy_(qv * 0.5)
    expect = fmha.memory_efficient_attention_forward(qv, kv, vv, bias, op=triton_splitk.FwOp)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expect, atol=0, rtol=0)


def paged_decode(B, R, Mkv, page, device, g):
    """q [1, B, 2, R, 128] against a K/V of B lanes of Mkv keys scattered over shuffled pages:
    (q, k, v, paged bias) and the same keys contiguous (k, v, padded bias)."""
    Hkv, D = 2, 128
    q = rand((1, B, Hkv, R, D), torch.bfloat16, device, g)
    kc, vc = (rand((1, B * Mkv, Hkv, 1, D), torch.bfloat16, device, g) for _ in range(2))
    per = Mkv // page
    bt = torch.randperm(B * per + 2, generator=g)[: B * per].reshape(B, per).to(torch.int32).to(device)
    j = torch.arange(Mkv, device=device)
    rows = (bt[:, j // page].long() * page + j % page).reshape(-1)
    kp, vp = (torch.zeros(1, (B * per + 2) * page, Hkv, 1, D, dtype=torch.bfloat16, device=device) for _ in range(2))
    kp[0].index_copy_(0, rows, kc[0])
    vp[0].index_copy_(0, rows, vc[0])
    ex = lambda x: x.expand(1, x.shape[1], Hkv, R, D)  # noqa: E731
    paged = ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens([1] * B, [Mkv - 5 * b for b in range(B)], bt, page,
                                                             device=device)
    padded = ab.BlockDiagonalPaddedKeysMask.from_seqlens([1] * B, Mkv, [Mkv - 5 * b for b in range(B)], device=device)
    return q, (ex(kp), ex(vp), paged), (ex(kc), ex(vc), padded)


def test_paged_pool_too_small_is_refused():
    # A host-side block table is checked against the pool: the error names both sizes.
    g = torch.Generator().manual_seed(5)
    q, (k, v, paged), _ = paged_decode(2, 4, 512, 64, "cpu", g)
    short = k.shape[1] - 2 * 64
    with pytest.raises(ValueError, match=f"paged K/V has {short} keys but block_tables addresses"):
        fmha.memory_efficient_attention_forward(q, k[:, :short], v[:, :short], paged, op=triton_splitk.FwOp)


@needs_cuda
def test_cuda_graph_captures_paged_decode():
    # A paged decode step runs without a host sync (so it can be captured), and its replays give
    # the eager result, which equals the same keys laid out contiguously.
    g = torch.Generator().manual_seed(6)
    q, (kp, vp, paged), (kc, vc, padded) = paged_decode(3, 4, 2048, 64, "cuda", g)
    fwd = lambda: fmha.memory_efficient_attention_forward(q, kp, vp, paged, op=triton_splitk.FwOp)  # noqa: E731
    fwd()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fwd()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph, out = capture(fwd)
    for i in range(2):
        q.copy_(rand(q.shape, q.dtype, "cuda", g))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, fwd(), atol=0, rtol=0, msg=f"replay {i}")
        want = fmha.memory_efficient_attention_forward(q, kc, vc, padded, op=triton_splitk.FwOp)
        torch.testing.assert_close(out, want, msg=f"paged vs contiguous, replay {i}")


@needs_cuda
@pytest.mark.parametrize("splits", [1, 3, 0])
def test_rows_outside_every_sequence(splits):
    # Varlen q rows before the first sequence and after the last one: O = 0 and LSE -inf, on the GPU
    # (written by the split kernel when it merges the splits) as on the CPU.
    torch.full((1 << 24,), math.nan, device="cuda")
    torch.cuda.synchronize()
    g = torch.Generator().manual_seed(21)
    Hkv, R, D, Mkv = 2, 4, 128, 700
    q = rand((1, 9, Hkv, R, D), torch.bfloat16, "cpu", g)
    k, v = (rand((1, Mkv, Hkv, D), torch.bfloat16, "cpu", g) for _ in range(2))  # the op's [B, Mkv, Hkv, K]
    i32 = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    meta = dict(seqstart_q=i32([2, 4, 6]), seqstart_k=i32([0, 300, 700]), max_seqlen_q=2, scale=D ** -0.5,
                num_splits=splits)
    to = lambda d: {n: x.to(d) if isinstance(x, torch.Tensor) else x for n, x in meta.items()}  # noqa: E731
    out_c, lse_c = torch.ops.mslk.fmha_decode_splitk(q, k, v, **to("cpu"))
    out_g, lse_g = torch.ops.mslk.fmha_decode_splitk(q.cuda(), k.cuda(), v.cuda(), **to("cuda"))
    outside = [0, 1, 6, 7, 8]
    assert torch.equal(out_g[:, outside].cpu(), torch.zeros_like(out_c[:, outside]))
    assert torch.isneginf(lse_g[..., outside]).all()
    assert_attention_close(out_g.cpu(), out_c.double(), torch.bfloat16)
    fin = torch.isfinite(lse_c)
    assert torch.equal(torch.isfinite(lse_g.cpu()), fin)
    torch.testing.assert_close(lse_g.cpu()[fin], lse_c[fin], atol=2e-3, rtol=1e-4)


@needs_cuda
@pytest.mark.parametrize("op", [triton_splitk.FwOp, triton_splitk.FwOp_S4, triton_splitk.FwOp_S128])
def test_cuda_graph_replays_merge_in_kernel(op):
    # Dense decode with several splits: the last CTA of each (sequence, K/V head) merges the splits
    # through a counter word the kernel clears; every replay must merge again, with q changed between.
    g = torch.Generator().manual_seed(4)
    qv, kv, vv = gqa_qkv(3, 1, 4096, 2, 4, 128, torch.bfloat16, "cuda", g)
    fwd = lambda: fmha.memory_efficient_attention_forward_requires_grad(qv, kv, vv, op=op)  # noqa: E731
    graph, (out, lse) = capture(fwd)
    for i in range(3):
        qv.copy_(rand(qv.shape, qv.dtype, "cuda", g))
        graph.replay()
        torch.cuda.synchronize()
        want, want_lse = fwd()
        torch.testing.assert_close(out, want, atol=0, rtol=0, msg=f"replay {i}")
        torch.testing.assert_close(lse, want_lse, atol=0, rtol=0, msg=f"replay {i}")
    ref_out, ref_lse = reference(qv, kv, vv, None)
    assert_attention_close(out, ref_out, torch.bfloat16)
    torch.testing.assert_close(lse.double().cpu(), ref_lse, atol=2e-3, rtol=1e-4)


def test_get_split_k():
    # The heuristic of num_splits=0 (fmha_decode_plan.cpp): one split once the (sequence, K/V head)
    # pairs fill the SMs, else as many as fit one wave, bounded by the keys.
    num_splits = torch.ops.mslk.fmha_decode_num_splits
    assert num_splits(10, 100000, 128, 132, 0) == 13  # 132 SMs / 10 pairs, one CTA an SM
    assert num_splits(10, 100000, 128, 132, 2) == 26  # two CTAs an SM
    assert num_splits(10, 1024, 128, 132, 0) == 4  # at least 256 keys a split at d128
    assert num_splits(132, 1 << 20, 128, 132, 0) == 1
    assert num_splits(1, 1 << 30, 128, 132, 0) == 128  # the cap
    with pytest.raises(ValueError, match="sms"):
        num_splits(1, 1, 128, 0)
    assert triton_splitk.FwOp.get_split_k(64, 8, 4, 2048, 1, 0) == 1  # 512 pairs
    many = triton_splitk.FwOp.get_split_k(1, 8, 4, 131072, 1, 256, is_paged=True)
    assert many > 1 and many == triton_splitk.FwOp_S8.get_split_k(1, 8, 4, 131072, 1, 256, True)
