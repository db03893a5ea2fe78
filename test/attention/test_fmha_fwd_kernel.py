"""mslk::fmha_fused_fwd (the fused attention forward behind cutlass.FwOp): the CPU path and the mask
descriptor translation here; the CUDA kernel against the float64 oracle wherever a GPU exists."""

import math

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import attn_bias as ab
from mslk.attention.fmha import cutlass, dispatch, reference
from mslk.attention.fmha.common import Inputs, _kernel_registered
from test.attention import oracle as o
from test.attention.tolerance import assert_attention_close

HAS_OP = hasattr(torch.ops.mslk, "fmha_fused_fwd")
HAS_CUDA_KERNEL = HAS_OP and torch.cuda.is_available() and _kernel_registered("mslk::fmha_fused_fwd", "CUDA")
needs_cuda = pytest.mark.skipif(not HAS_CUDA_KERNEL, reason="needs a GPU and a CUDA build of mslk")
pytestmark = pytest.mark.skipif(not HAS_OP, reason="native library not loaded")


def rand(shape, dtype=torch.float32, device="cpu", gen=None):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def dense_masks(mq, mkv):
    return [
        None,
        ab.LowerTriangularMask(),
        ab.LowerTriangularFromBottomRightMask(),
        ab.LowerTriangularFromBottomRightLocalAttentionMask(3),
        ab.LocalAttentionFromBottomRightMask(2, 1),
        ab.LocalAttentionFromBottomRightMask(0, 0),
        "tensor",
        "causal+tensor",
    ]


def _with(m, t, **kw):
    return t(q_seqinfo=m.q_seqinfo, k_seqinfo=m.k_seqinfo, **kw)


def varlen_masks():
    ql, kl = [3, 0, 5, 1], [4, 2, 0, 6]
    same = [3, 0, 5, 1]
    return [
        ab.BlockDiagonalMask.from_seqlens(ql, kl),
        ab.BlockDiagonalCausalMask.from_seqlens(same),
        ab.BlockDiagonalCausalFromBottomRightMask.from_seqlens([2, 0, 3], [4, 1, 3]),
        ab.BlockDiagonalCausalMask.from_seqlens(same).make_local_attention(2),
        _with(ab.BlockDiagonalMask.from_seqlens([2, 0, 3], [4, 1, 3]),
              ab.BlockDiagonalCausalLocalAttentionFromBottomRightMask, _window_size=2),
        ab.BlockDiagonalPaddedKeysMask.from_seqlens([2, 0, 3], 6, [4, 1, 0]),
        ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1, 2, 1], 5, [5, 3, 0]),
        ab.BlockDiagonalLocalAttentionPaddedKeysMask.from_seqlens_local([2, 1, 3], 6, [4, 6, 2], 1, 2),
        ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask.from_seqlens_local([2, 1, 3], 6, [4, 6, 2], 2),
        ab.BlockDiagonalGappyKeysMask.from_seqlens([2, 3], [1, 9, 20], [5, 4]),
        ab.BlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens([2, 3], [1, 9, 20], [5, 4]),
    ]


def paged_masks(device="cpu", page_size=4):
    """Paged masks over shuffled physical pages (with pages no lane uses); K/V have 14 pages."""
    g = torch.Generator().manual_seed(page_size)
    bt = torch.randperm(14, generator=g)[:12].reshape(3, 4).to(torch.int32)  # 3 lanes x 4 pages
    row = 4 * page_size
    ql, kl = [2, 0, 5], [row - 1, 3, row]
    return [
        ab.PagedBlockDiagonalPaddedKeysMask.from_seqlens(ql, kl, bt, page_size, device=device),
        ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens(ql, kl, bt, page_size, device=device),
        ab.PagedBlockDiagonalCausalLocalPaddedKeysMask.from_seqlens_local(ql, kl, bt, page_size, 3, device=device),
        ab.PagedBlockDiagonalGappyKeysMask.from_seqlens(ql, [1, 0, page_size + 2, 0], [row - 2, 5, row - page_size - 2],
                                                        bt, page_size, device=device),
        ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask.from_seqlens(ql, [page_size - 1, 2, 0, 0], [page_size + 2, 1, row],
                                                                        bt, page_size, device=device),
    ]


def make_bias(spec, B, H, mq, mkv, dtype, device, gen=None):
    if spec == "tensor":
        return rand((1, H, mq, mkv), torch.float32, device, gen)  # broadcast over B
    if spec == "causal+tensor":
        return ab.LowerTriangularMask().add_bias(rand((B, 1, mq, mkv), torch.float32, device, gen))
    return spec


def oracle(q, k, v, bias, scale):
    b = reference.dense_bias(bias, q, k)
    return o.attention_f64(q, k, v, b, scale)


def run_op(q, k, v, bias, scale):
    desc = cutlass.mask_descriptor(bias, q.device)
    tb = desc.pop("bias")
    return torch.ops.mslk.fmha_fused_fwd(q, k, v, tb, scale=scale, **desc)


# ---- CPU: the op's CPU path, which also checks the descriptor translation ----------------------

@pytest.mark.parametrize("mq,mkv", [(1, 1), (5, 5), (4, 9), (9, 4), (1, 7), (7, 1)])
@pytest.mark.parametrize("idx", range(8))
def test_cpu_dense_masks(mq, mkv, idx):
    g = torch.Generator().manual_seed(idx * 100 + mq * 10 + mkv)
    B, H, K, Kv = 2, 3, 8, 12
    q, k, v = rand((B, mq, H, K), gen=g), rand((B, mkv, H, K), gen=g), rand((B, mkv, H, Kv), gen=g)
    bias = make_bias(dense_masks(mq, mkv)[idx], B, H, mq, mkv, torch.float32, "cpu", g)
    out, lse = run_op(q, k, v, bias, 0.4)
    want_out, want_lse = oracle(q, k, v, bias, 0.4)
    torch.testing.assert_close(out.double(), want_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("idx", range(len(varlen_masks())))
def test_cpu_varlen_masks(idx):
    bias = varlen_masks()[idx]
    g = torch.Generator().manual_seed(idx)
    mq, mkv = bias.q_seqinfo.total, bias._kv_total()
    q, k, v = rand((1, mq, 2, 16), gen=g), rand((1, mkv, 2, 16), gen=g), rand((1, mkv, 2, 8), gen=g)
    out, lse = run_op(q, k, v, bias, 0.25)
    want_out, want_lse = oracle(q, k, v, bias, 0.25)
    torch.testing.assert_close(out.double(), want_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("page_size", [4, 16])
@pytest.mark.parametrize("idx", range(5))
def test_cpu_paged_masks(idx, page_size):
    bias = paged_masks("cpu", page_size)[idx]
    g = torch.Generator().manual_seed(idx)
    mq, phys = bias.q_seqinfo.total, 14 * page_size
    q, k, v = rand((1, mq, 2, 16), gen=g), rand((1, phys, 2, 16), gen=g), rand((1, phys, 2, 8), gen=g)
    out, lse = run_op(q, k, v, bias, 0.25)
    want_out, want_lse = oracle(q, k, v, bias, 0.25)
    torch.testing.assert_close(out.double(), want_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)


def test_cpu_paged_errors():
    bias = paged_masks("cpu", 4)[0]
    q, k = torch.zeros(1, bias.q_seqinfo.total, 2, 8), torch.zeros(1, 14 * 4, 2, 8)
    d = cutlass.mask_descriptor(bias)
    d.pop("bias")
    with pytest.raises(ValueError, match="pages outside"):
        torch.ops.mslk.fmha_fused_fwd(q, k[:, :20], k[:, :20], **d)
    with pytest.raises(ValueError, match="page_size"):
        torch.ops.mslk.fmha_fused_fwd(q, k, k, **{**d, "page_size": 0})
    with pytest.raises(ValueError, match="one row per sequence"):
        torch.ops.mslk.fmha_fused_fwd(q, k, k, **{**d, "block_tables": d["block_tables"][:2]})
    with pytest.raises(TypeError, match="block_tables"):
        torch.ops.mslk.fmha_fused_fwd(q, k, k, **{**d, "block_tables": d["block_tables"].long()})
    with pytest.raises(ValueError, match="needs seqstart_q"):
        torch.ops.mslk.fmha_fused_fwd(q, k, k, block_tables=d["block_tables"], page_size=4)
    with pytest.raises(ValueError, match="needs seqlen_k"):
        torch.ops.mslk.fmha_fused_fwd(q, k, k, **{**d, "seqlen_k": None})


def test_cpu_padded_keys_without_varlen_and_fully_masked_rows():
    g = torch.Generator().manual_seed(0)
    B, M, N, H = 3, 5, 7, 2
    q, k, v = rand((B, M, H, 8), gen=g), rand((B, N, H, 8), gen=g), rand((B, N, H, 8), gen=g)
    seqlen = torch.tensor([7, 0, 3], dtype=torch.int32)
    out, lse = torch.ops.mslk.fmha_fused_fwd(q, k, v, seqlen_k=seqlen, mask_kind=2, scale=1.0)
    bias = torch.zeros(B, 1, M, N)
    for b, n in enumerate(seqlen.tolist()):
        bias[b, :, :, n:] = -math.inf
        allowed = torch.arange(N)[None, :] - torch.arange(M)[:, None] <= n - M
        bias[b, 0].masked_fill_(~allowed, -math.inf)
    want_out, want_lse = o.attention_f64(q, k, v, bias, 1.0)
    torch.testing.assert_close(out.double(), want_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)
    assert torch.isneginf(lse[1]).all() and (out[1] == 0).all()


def test_descriptor_translation():
    d = cutlass.mask_descriptor(None)
    assert (d["mask_kind"], d["window_left"], d["window_right"], d["seqstart_q"]) == (0, -1, -1, None)
    assert cutlass.mask_descriptor(ab.LowerTriangularMask())["mask_kind"] == 1
    assert cutlass.mask_descriptor(ab.LowerTriangularFromBottomRightMask())["mask_kind"] == 2
    d = cutlass.mask_descriptor(ab.LowerTriangularFromBottomRightLocalAttentionMask(4))
    assert (d["mask_kind"], d["window_left"], d["window_right"]) == (2, 3, -1)
    d = cutlass.mask_descriptor(ab.LocalAttentionFromBottomRightMask(5, 2))
    assert (d["mask_kind"], d["window_left"], d["window_right"]) == (3, 5, 2)
    t = torch.zeros(2, 2)
    assert cutlass.mask_descriptor(t)["bias"] is t
    m = ab.BlockDiagonalCausalWithOffsetPaddedKeysMask.from_seqlens([1, 2], 4, [3, 4])
    d = cutlass.mask_descriptor(m)
    assert d["mask_kind"] == 2 and d["max_seqlen_q"] == 2
    assert d["seqstart_q"].tolist() == [0, 1, 3] and d["seqstart_k"].tolist() == [0, 4, 8]
    assert d["seqlen_k"].tolist() == [3, 4]
    d = cutlass.mask_descriptor(ab.BlockDiagonalCausalMask.from_seqlens([2, 3]).make_local_attention(2))
    assert (d["mask_kind"], d["window_left"], d["seqlen_k"]) == (1, 1, None)
    with pytest.raises(NotImplementedError):
        cutlass.mask_descriptor(ab.PagedBlockDiagonalPaddedKeysMask)  # a class, not an instance


def test_operator_class_availability():
    q = torch.zeros(1, 4, 2, 64, dtype=torch.half)
    assert cutlass.FwOp.is_available() == (HAS_OP and _kernel_registered("mslk::fmha_fused_fwd", "CUDA"))
    if not cutlass.FwOp.is_available():
        assert any("CUDA build" in r for r in cutlass.FwOp.not_supported_reasons(Inputs(q, q, q)))
    # the spec's limits: float32 and head dims up to 65536 (the exact path past the kernels' 256)
    reasons = cutlass.FwOp.not_supported_reasons(Inputs(q.float(), q.float(), q.float()))
    assert not any("dtype" in r for r in reasons)
    big = torch.zeros(1, 4, 2, 1024, dtype=torch.half)
    assert not any("> " in r for r in cutlass.FwOp.not_supported_reasons(Inputs(big, big, big)))
    huge = torch.zeros(1, 1, 1, 65537, dtype=torch.half)
    assert any("> 65536" in r for r in cutlass.FwOp.not_supported_reasons(Inputs(huge, huge, huge)))
    assert any("dtype" in r for r in cutlass.FwOp.not_supported_reasons(Inputs(q.double(), q.double(), q.double())))
    assert not any("dropout" in r for r in cutlass.FwOp.not_supported_reasons(Inputs(q, q, q, p=0.1)))
    for t in (ab.PagedBlockDiagonalPaddedKeysMask, ab.PagedBlockDiagonalGappyKeysMask):
        assert t in cutlass.FwOp.SUPPORTED_ATTN_BIAS_TYPES  # paged K/V read through the block table
    # CPU inputs never go to it; without a GPU, dispatch still picks the reference
    assert dispatch._dispatch_fw(Inputs(q, q, q), False) is reference.FwOp


def test_cpu_errors():
    q = torch.zeros(1, 4, 2, 8)
    with pytest.raises(ValueError, match="mask_kind"):
        torch.ops.mslk.fmha_fused_fwd(q, q, q, mask_kind=7)
    with pytest.raises(ValueError, match="seqstart_k"):
        torch.ops.mslk.fmha_fused_fwd(q, q, q, seqstart_q=torch.tensor([0, 4], dtype=torch.int32))
    with pytest.raises(ValueError, match="seqlen_k"):
        torch.ops.mslk.fmha_fused_fwd(q, q, q, seqlen_k=torch.tensor([1, 2], dtype=torch.int32))
    with pytest.raises(ValueError, match="broadcast"):
        torch.ops.mslk.fmha_fused_fwd(q, q, q, torch.zeros(3, 4, 4))


def _opcheck_args(device, dtype):
    g = torch.Generator().manual_seed(0)
    q = rand((1, 6, 2, 16), dtype, device, g)
    k = rand((1, 7, 2, 16), dtype, device, g)
    v = rand((1, 7, 2, 8), dtype, device, g)
    sq = torch.tensor([0, 2, 6], dtype=torch.int32, device=device)
    sk = torch.tensor([0, 3, 7], dtype=torch.int32, device=device)
    return [
        ((q, k, v), dict(mask_kind=1, scale=0.3)),
        ((q, k, v, rand((2, 6, 7), torch.float32, device, g)), dict(mask_kind=3, window_left=2, window_right=1)),
        ((q, k, v), dict(seqstart_q=sq, seqstart_k=sk, max_seqlen_q=4, mask_kind=2)),
        # paged: 2 lanes of 2 pages of 2 keys over the 3 (+1 partial) pages of k / v
        ((q, k, v), dict(seqstart_q=sq, seqstart_k=torch.tensor([0, 1, 0], dtype=torch.int32, device=device),
                         seqlen_k=torch.tensor([4, 2], dtype=torch.int32, device=device), mask_kind=2,
                         block_tables=torch.tensor([[2, 0], [1, 2]], dtype=torch.int32, device=device),
                         page_size=2)),
    ]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
def test_opcheck(device):
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    for args, kwargs in _opcheck_args(device, dtype):
        torch.library.opcheck(torch.ops.mslk.fmha_fused_fwd.default, args, kwargs)


# ---- CUDA: the kernel against the float64 oracle -------------------------------------------------

@pytest.fixture(autouse=True)
def _fa2_kernel(monkeypatch):
    """Pins the FA2 (mma.sync) kernel: on sm_90 the default would pick the Hopper kernel, which
    test_fmha_fwd_sm90.py runs through the same cases."""
    monkeypatch.setenv("MSLK_FMHA_KERNEL", "sm80")


def check_cuda(q, k, v, bias, scale=None):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    out, lse = run_op(q, k, v, bias, scale)
    want_out, want_lse = oracle(q, k, v, bias, scale)
    assert out.dtype == q.dtype and out.shape == want_out.shape and lse.dtype == torch.float32
    assert_attention_close(out, want_out, q.dtype, head_dim=q.shape[-1], v_max=v.abs().max())
    fin = torch.isfinite(want_lse)
    assert torch.equal(torch.isneginf(lse), ~fin)
    torch.testing.assert_close(lse.double()[fin], want_lse[fin], atol=2e-3, rtol=1e-3)
    assert (out.double()[~fin.permute(0, 2, 1)] == 0).all()


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("mq,mkv", [(1, 1), (7, 7), (127, 127), (1000, 1000), (1, 1000), (127, 1000), (1000, 7)])
@pytest.mark.parametrize("idx", range(8))
def test_cuda_dense_masks(dtype, d, mq, mkv, idx):
    g = torch.Generator().manual_seed(idx + d + mq + mkv)
    B, H = 2, 3
    q, k, v = (rand((B, mq, H, d), dtype, "cuda", g), rand((B, mkv, H, d), dtype, "cuda", g),
               rand((B, mkv, H, d), dtype, "cuda", g))
    check_cuda(q, k, v, make_bias(dense_masks(mq, mkv)[idx], B, H, mq, mkv, dtype, "cuda", g))


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_long(dtype, causal):
    g = torch.Generator().manual_seed(1)
    q, k, v = (rand((1, 4096, 2, 128), dtype, "cuda", g) for _ in range(3))
    check_cuda(q, k, v, ab.LowerTriangularMask() if causal else None)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("K,Kv", [(64, 128), (128, 64), (256, 64), (32, 256), (96, 160), (192, 192), (40, 24), (3, 5)])
@pytest.mark.parametrize("bias", [None, ab.LowerTriangularFromBottomRightMask()])
def test_cuda_head_dims(dtype, K, Kv, bias):
    g = torch.Generator().manual_seed(K * 1000 + Kv)
    q, k, v = (rand((2, 130, 2, K), dtype, "cuda", g), rand((2, 200, 2, K), dtype, "cuda", g),
               rand((2, 200, 2, Kv), dtype, "cuda", g))
    check_cuda(q, k, v, bias, scale=0.3)


@needs_cuda
@pytest.mark.parametrize("dtype,K,Kv", [(torch.float32, 64, 64), (torch.float32, 40, 72), (torch.float16, 320, 320),
                                        (torch.bfloat16, 512, 384), (torch.float32, 1024, 8)])
@pytest.mark.parametrize("bias", [None, ab.LowerTriangularFromBottomRightMask(), "tensor", "varlen", "paged"])
def test_cuda_exact_path(monkeypatch, dtype, K, Kv, bias):
    # float32 and head dims over 256 (the spec's cutlass.FwOp limits): the exact path on the GPU,
    # through the op and through cutlass.FwOp, against the float64 oracle and the CPU backend
    monkeypatch.delenv("MSLK_FMHA_KERNEL")
    g = torch.Generator().manual_seed(K + Kv)
    B, H, mq, mkv = 2, 2, 130, 200
    if bias == "varlen":
        bias = varlen_masks()[2].to("cuda")
        B, mq, mkv = 1, bias.q_seqinfo.total, bias._kv_total()
    elif bias == "paged":
        bias = paged_masks("cuda", 16)[1]
        B, mq, mkv = 1, bias.q_seqinfo.total, 14 * 16
    q, k, v = (rand((B, mq, H, K), dtype, "cuda", g), rand((B, mkv, H, K), dtype, "cuda", g),
               rand((B, mkv, H, Kv), dtype, "cuda", g))
    bias = make_bias(bias, B, H, mq, mkv, dtype, "cuda", g)
    check_cuda(q, k, v, bias, scale=0.3)
    got, lse = run_op(q, k, v, bias, 0.3)
    host = bias.cpu() if isinstance(bias, torch.Tensor) else bias.to("cpu") if bias is not None else None
    want, want_lse = run_op(q.cpu(), k.cpu(), v.cpu(), host, 0.3)
    # float32: two float32 orders of the K-term score sum, whose difference grows with K
    wide = max(1, K / 64)
    tol = dict(atol=1e-5 * wide, rtol=1e-4 * wide) if dtype == torch.float32 else dict(atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(got.cpu(), want, **tol)
    torch.testing.assert_close(lse.cpu(), want_lse, atol=1e-4, rtol=1e-4)
    assert not cutlass.FwOp.not_supported_reasons(Inputs(q, k, v, bias, scale=0.3))
    out = fmha.memory_efficient_attention_forward(q, k, v, bias, scale=0.3, op=cutlass.FwOp)
    torch.testing.assert_close(out, got)
    monkeypatch.setenv("MSLK_FMHA_KERNEL", "sm80")  # a forced fused kernel cannot take it: a clear error
    with pytest.raises(ValueError, match="MSLK_FMHA_KERNEL forces a fused kernel"):
        run_op(q, k, v, bias, 0.3)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_noncontiguous_and_expanded(dtype):
    g = torch.Generator().manual_seed(3)
    B, M, N, H, D = 2, 300, 257, 4, 128
    q = rand((B, H, M, D), dtype, "cuda", g).transpose(1, 2)  # [B, M, H, D], strides permuted
    k = rand((B, N, 1, D), dtype, "cuda", g).expand(B, N, H, D)  # MQA: stride 0 over heads
    v = rand((B, N, 1, 2 * D), dtype, "cuda", g)[..., ::1][..., :D].expand(B, N, H, D)  # sliced + expanded
    check_cuda(q, k, v, None)
    check_cuda(q, k, v, ab.LowerTriangularMask())
    tb = rand((B, 1, 1, N), torch.float32, "cuda", g).expand(B, H, M, N)  # key-padding style bias
    check_cuda(q, k, v, tb)
    check_cuda(q, k, v, rand((1, H, M, N), dtype, "cuda", g))  # bias in q's dtype


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("idx", range(len(varlen_masks())))
@pytest.mark.parametrize("scale_up", [1, 150])
def test_cuda_varlen(dtype, idx, scale_up):
    if scale_up == 1:
        bias = varlen_masks()[idx]
    else:  # the same mask kinds with long blocks (several tiles per block)
        base = varlen_masks()[idx]
        bias = _scaled(base, scale_up)
    g = torch.Generator().manual_seed(idx)
    mq, mkv = bias.q_seqinfo.total, bias._kv_total()
    q, k, v = (rand((1, mq, 2, 64), dtype, "cuda", g), rand((1, mkv, 2, 64), dtype, "cuda", g),
               rand((1, mkv, 2, 64), dtype, "cuda", g))
    bias = bias.to("cuda") if hasattr(bias, "to") else bias
    check_cuda(q, k, v, bias)


def _scaled(m, f):
    ql = [x * f for x in m.q_seqinfo.seqlen_py]
    t = type(m)
    if isinstance(m.k_seqinfo, ab._PaddedSeqLenInfo):
        kl = [x * f for x in m.k_seqinfo.seqlen_py]
        kw = {}
        if hasattr(m, "window_left"):
            return t.from_seqlens_local(ql, m.k_seqinfo.padding * f, kl, m.window_left, m.window_right)
        if hasattr(m, "_window_size"):
            return t.from_seqlens_local(ql, m.k_seqinfo.padding * f, kl, m._window_size * f)
        return t.from_seqlens(ql, m.k_seqinfo.padding * f, kl, **kw)
    if isinstance(m.k_seqinfo, ab._GappySeqInfo):
        return t.from_seqlens(ql, [x * f for x in m.k_seqinfo.seqstart_py], [x * f for x in m.k_seqinfo.seqlen_py])
    kl = [x * f for x in m.k_seqinfo.seqlen_py]
    out = ab.BlockDiagonalMask.from_seqlens(ql, kl)
    kw = {}
    if hasattr(m, "_window_size"):
        kw["_window_size"] = m._window_size * f
    return _with(out, t, **kw)


@needs_cuda
def test_cuda_through_operator_class(monkeypatch):
    from mslk.attention import fmha
    g = torch.Generator().manual_seed(5)
    q, k, v = (rand((2, 100, 2, 4, 64), torch.bfloat16, "cuda", g) for _ in range(3))  # BMGHK
    out = fmha.memory_efficient_attention_forward(q, k, v, ab.LowerTriangularMask(), op=cutlass.FwOp)
    want = fmha.memory_efficient_attention_forward(q.double(), k.double(), v.double(), ab.LowerTriangularMask(),
                                                   op=reference.FwOp)
    assert_attention_close(out, want, torch.bfloat16)
    m = ab.BlockDiagonalCausalMask.from_seqlens([5, 0, 70])
    q, k, v = (rand((1, 75, 3, 64), torch.float16, "cuda", g) for _ in range(3))
    out, ctx = cutlass.FwOp.apply(Inputs(q, k, v, m.to("cuda")), needs_gradient=True)
    assert ctx.lse.shape == (3, 3, 70)  # padded varlen LSE
    assert torch.isinf(ctx.lse[1]).all() and (ctx.lse[1] > 0).all()


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("page_size", [16, 64, 256])
@pytest.mark.parametrize("idx", range(5))
def test_cuda_paged_masks(dtype, d, page_size, idx):
    bias = paged_masks("cuda", page_size)[idx]
    g = torch.Generator().manual_seed(idx + d + page_size)
    mq, phys = bias.q_seqinfo.total, 14 * page_size
    q, k, v = (rand((1, mq, 4, d), dtype, "cuda", g), rand((1, phys, 4, d), dtype, "cuda", g),
               rand((1, phys, 4, d), dtype, "cuda", g))
    check_cuda(q, k, v, bias)
