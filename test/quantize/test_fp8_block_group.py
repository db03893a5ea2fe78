"""quantize_fp8_block and quantize_fp8_group against the tile reference (exact bits)."""

import pytest
import torch

from mslk.quantize.triton.fp8_quantize import (
    quantize_fp8_block,
    quantize_fp8_group,
    triton_quantize_fp8_block,
    triton_quantize_fp8_group,
)
from test.conftest import requires_cuda
from test.quantize.fp8_reference import FP8_MAX, check_dequant_error, quantize_tiles, rand

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
EPS = 1e-12


def same_bits(a, b):
    return torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,K,bm,bk", [(300, 520, 256, 256), (256, 512, 128, 128), (1, 1, 256, 256),
                                       (129, 70, 100, 60), (7, 1000, 1, 128), (513, 264, 64, 8)])
def test_block(device, dtype, M, K, bm, bk):
    x = rand((M, K), dtype, device)
    xq, scale = quantize_fp8_block(x, bm, bk)
    exq, escale = quantize_tiles(x, bm, bk, EPS)
    assert scale.shape == (-(-M // bm), -(-K // bk))
    assert same_bits(xq, exq)
    torch.testing.assert_close(scale.cpu(), escale, rtol=0, atol=0)
    full = escale.repeat_interleave(bm, 0)[:M].repeat_interleave(bk, 1)[:, :K]
    check_dequant_error(xq, full, x)
    xq_t, scale_t = triton_quantize_fp8_block(x, bm, bk, k_major=False)
    assert same_bits(xq_t, exq) and torch.equal(scale_t.cpu(), escale.t())


@pytest.mark.parametrize("dtype", DTYPES)
def test_block256_strided_scale_ub(device, dtype):
    """The default 256x256 blocks over a view with a row stride > K (on CUDA: the TMA ring for 16-bit
    input, whose tensor map carries the stride), a ragged last column tile and scale_ub."""
    base = rand((600, 784), dtype, device, scale=40.0)
    x = base[:, 16:536]
    ub = torch.tensor([1.5], device=device)
    xq, scale = quantize_fp8_block(x, scale_ub=ub)
    exq, escale = quantize_tiles(x, 256, 256, EPS, ub=1.5)
    assert same_bits(xq, exq) and torch.equal(scale.cpu(), escale)


def test_block_scale_ub_and_strided(device):
    base = rand((260, 300), torch.bfloat16, device, scale=40.0)
    x = base[:, 8:264]
    ub = torch.tensor([1.5], device=device)
    xq, scale = quantize_fp8_block(x, 128, 128, scale_ub=ub)
    exq, escale = quantize_tiles(x, 128, 128, EPS, ub=1.5)
    assert same_bits(xq, exq) and torch.equal(scale.cpu(), escale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,gs", [((30, 512), 128), ((4, 1024), 64), ((9, 96), 32), ((3, 48), 16),
                                      ((5, 40), 8), ((2, 3, 256), 256), ((6, 1024), 512), ((4, 72), 24),
                                      ((1, 128), 128), ((17, 4), 1)])
def test_group(device, dtype, shape, gs):
    x = rand(shape, dtype, device)
    xq, scale = quantize_fp8_group(x, gs)
    x2 = x.reshape(-1, shape[-1])
    exq, escale = quantize_tiles(x2, 1, gs, EPS)
    assert scale.shape == (*shape[:-1], shape[-1] // gs)
    assert same_bits(xq.reshape(x2.shape), exq)
    torch.testing.assert_close(scale.reshape(escale.shape).cpu(), escale, rtol=0, atol=0)
    if len(shape) == 2:
        _, scale_mn = triton_quantize_fp8_group(x, gs, k_major=False)
        assert torch.equal(scale_mn.cpu(), escale.t())


@pytest.mark.parametrize("m_sizes", [[3, 0, 5, 1], [0, 0, 9], [4, 4], [2, 1]])
@pytest.mark.parametrize("k_major", [False, True])
def test_group_m_sizes_layout(device, m_sizes, k_major):
    """With m_sizes each segment's scales are [K/g, m] (M-major) inside it, for either k_major."""
    M, K, gs = 9, 512, 128
    x = rand((M, K), torch.bfloat16, device)
    ms = torch.tensor(m_sizes, dtype=torch.int64, device=device)
    xq, scale = quantize_fp8_group(x, gs, m_sizes=ms, k_major=k_major)
    exq, escale = quantize_tiles(x, 1, gs, EPS)
    assert scale.shape == (M, K // gs) and same_bits(xq, exq)
    flat = scale.reshape(-1).cpu()
    segs, start = list(m_sizes), 0
    if sum(segs) < M:
        segs.append(M - sum(segs))  # rows past the last segment form one trailing segment
    for m in segs:
        got = flat[start * (K // gs):(start + m) * (K // gs)].reshape(K // gs, m)
        assert torch.equal(got, escale[start:start + m].t())
        start += m
    _, scale_t = triton_quantize_fp8_group(x, gs, m_sizes=ms.int(), k_major=k_major)
    assert torch.equal(scale_t, scale)


def test_group_strided_and_ub(device):
    base = rand((10, 640), torch.float16, device, scale=30.0)
    x = base[:, 128:640]
    ub = torch.tensor([0.5], device=device)
    xq, scale = quantize_fp8_group(x, 128, scale_ub=ub)
    exq, escale = quantize_tiles(x, 1, 128, EPS, ub=0.5)
    assert same_bits(xq, exq) and torch.equal(scale.cpu(), escale)
    assert torch.all(scale <= 0.5 / FP8_MAX + 1e-9)


def test_group_block_empty(device):
    xq, s = quantize_fp8_group(torch.empty(0, 256, device=device), 128)
    assert xq.shape == (0, 256) and s.shape == (0, 2)
    xq, s = quantize_fp8_block(torch.empty(0, 300, device=device))
    assert xq.shape == (0, 300) and s.shape == (0, 2)


@requires_cuda
@pytest.mark.parametrize("schedule", ["auto", "oneshot", "hybrid-persistent", "staged", "cluster", "bulk", "warp",
                                      "ring"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_block_group_cuda_equals_cpu(dtype, schedule, monkeypatch):
    """Every kernel schedule (MSLK_FP8_SCHEDULE, read per call) computes the same bits (auto: 256x256
    bf16 / fp16 blocks take the TMA ring, 512x128 ones the register + shared-memory kernel, one CTA
    a tile; hybrid-persistent that kernel walking tiles two CTAs an SM; oneshot the 1024-thread one;
    ring the TMA ring for 64 and 128 KB tiles: 256x256 and 512x128 bf16 / fp16, 128x128 fp32;
    384x256 (6 chunks) falls back)."""
    monkeypatch.setenv("MSLK_FP8_SCHEDULE", schedule)
    x = rand((4100, 7176), dtype, "cuda")  # edge tiles in both dimensions
    y = rand((257, 8200), dtype, "cuda")  # rows of 16 KB (bf16) as the view [:, :8192]
    for t, fn in ((x, lambda t: quantize_fp8_block(t, 128, 128)), (x, lambda t: quantize_fp8_block(t)),
                  (x, lambda t: quantize_fp8_block(t, 512, 128)), (x, lambda t: quantize_fp8_block(t, 384, 256)),
                  # a CTA width that is not a whole number of tile rows (256 threads, 48 vectors a row
                  # in bf16): the per-vector position division
                  (x, lambda t: quantize_fp8_block(t, 5, 384)),
                  # groups need K % group_size == 0: a view of the first 7168 columns (row stride 7176)
                  (x, lambda t: quantize_fp8_group(t[:, :7168], 128)),
                  (x, lambda t: quantize_fp8_group(t[:, :7168], 128, k_major=False)),
                  # the warp schedule's edges: rows of exactly 16 KB (bf16: groups of 32 lanes at 256),
                  # a masked tail (K % 256 != 0, groups of one vector), one row (fp32: 16 KB)
                  (y, lambda t: quantize_fp8_group(t[:, :8192], 128)),
                  (y, lambda t: quantize_fp8_group(t[:, :8192], 256, k_major=False)),
                  (y, lambda t: quantize_fp8_group(t[:, :1032], 8)),
                  (y, lambda t: quantize_fp8_group(t[:1, :4096], 64))):
        g, c = fn(t), fn(t.cpu())
        assert same_bits(g[0], c[0]) and torch.equal(g[1].cpu(), c[1])


def test_group_m_sizes_default_layout_feeds_grouped_gemm():
    import mslk.gemm  # noqa: F401

    G, N, K = 3, 256, 256
    ms = torch.tensor([5, 9, 3])
    x = rand((int(ms.sum()), K), torch.bfloat16, "cpu")
    w = rand((G, N, K), torch.bfloat16, "cpu")
    wq, ws = zip(*[quantize_fp8_block(w[g], 128, 128, k_major=False) for g in range(G)])
    xq, xs = quantize_fp8_group(x, m_sizes=ms)
    out = torch.ops.mslk.f8f8bf16_groupwise_grouped(xq, torch.stack(wq), xs, torch.stack(ws), ms)
    _, xs_mn = quantize_fp8_group(x, m_sizes=ms, k_major=False)
    assert torch.equal(xs, xs_mn)
    starts = [0] + torch.cumsum(ms, 0).tolist()
    ref = torch.cat([x[starts[g]:starts[g + 1]].float() @ w[g].float().t() for g in range(G)])
    assert ((out.float() - ref).norm() / ref.norm()).item() < 0.08


@pytest.mark.parametrize("k_major", [True, False])
def test_block_group_nd_input_flattens_rows(device, k_major):
    x = rand((2, 3, 256), torch.bfloat16, device)
    x2 = x.reshape(6, 256)
    for fn in (quantize_fp8_block, triton_quantize_fp8_block):
        xq, scale = fn(x, 128, 128, k_major=k_major)
        exq, escale = fn(x2, 128, 128, k_major=k_major)
        assert xq.shape == x.shape and same_bits(xq.reshape(6, 256), exq) and torch.equal(scale, escale)
    if not k_major:
        for fn in (quantize_fp8_group, triton_quantize_fp8_group):
            xq, scale = fn(x, 128, k_major=False)
            exq, escale = fn(x2, 128, k_major=False)
            assert scale.shape == (2, 6) and xq.shape == x.shape and torch.equal(scale, escale)
            assert same_bits(xq.reshape(6, 256), exq)
