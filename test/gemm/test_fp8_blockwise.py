"""Block/group-scaled FP8 GEMMs (f8f8bf16_blockwise, f8f8bf16_groupwise, f8f8bf16_groupwise_grouped,
matmul_fp8_block and the groupwise Python APIs) against a float64 dequantized reference, on
every device the tests see (CPU reference; the CUDA kernel on Hopper)."""

import pytest
import torch

from mslk.gemm.triton.fp8_gemm import matmul_fp8_block
from mslk.gemm.triton.fp8_groupwise_gemm import matmul_f8f8bf16_groupwise
from mslk.gemm.triton.fp8_groupwise_grouped_gemm import matmul_f8f8bf16_groupwise_grouped
from mslk.quantize.triton.fp8_quantize import quantize_fp8_block, quantize_fp8_group
from test.conftest import requires_cuda
from test.gemm.fp8_blockwise_reference import (cdiv, check, check_grouped, rand_fp8, rand_grid, ref_blockwise,
                                               ref_groupwise)

ops = torch.ops.mslk
MS = [1, 7, 16, 128, 1000]
NK = [(256, 256), (136, 384), (384, 128)]  # N = 136: not a multiple of the 128-wide tile


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("N,K", NK)
def test_groupwise(device, M, N, K):
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_grid(K // 128, M, device), rand_grid(K // 128, cdiv(N, 128), device)
    out = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    check(out, *ref_groupwise(xq, wq, xs, ws), device)
    o2 = torch.empty_like(out)
    assert matmul_f8f8bf16_groupwise(xq, wq, xs, ws, output=o2) is o2
    assert torch.equal(o2, out)


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("N,K", NK)
def test_blockwise_default_blocks(device, M, N, K):
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_grid(cdiv(M, 128), K // 128, device), rand_grid(cdiv(N, 128), K // 128, device)
    out = ops.f8f8bf16_blockwise(xq, wq, xs, ws)
    check(out, *ref_blockwise(xq, wq, xs, ws, 128, 128, 128), device)


@pytest.mark.parametrize("M", [1, 130])
@pytest.mark.parametrize("N,K", [(256, 208), (136, 336)])  # K not a multiple of 128: a partial last K block
def test_blockwise_k_not_multiple(device, M, N, K):
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_grid(cdiv(M, 128), cdiv(K, 128), device), rand_grid(cdiv(N, 128), cdiv(K, 128), device)
    out = ops.f8f8bf16_blockwise(xq, wq, xs, ws)
    check(out, *ref_blockwise(xq, wq, xs, ws, 128, 128, 128), device)
    xs2 = rand_grid(cdiv(K, 128), M, device)  # groupwise takes ceil(K / 128) groups as well
    ws2 = ws.t().contiguous()
    check(ops.f8f8bf16_groupwise(xq, wq, xs2, ws2), *ref_blockwise(xq, wq, xs2.t(), ws2.t(), 1, 128, 128), device)


@pytest.mark.parametrize("M", [7, 300])
def test_matmul_fp8_block_default_256(device, M):
    N, K = 520, 640  # neither a multiple of the 256 scale blocks
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_grid(cdiv(M, 256), cdiv(K, 256), device), rand_grid(cdiv(N, 256), cdiv(K, 256), device)
    out = matmul_fp8_block(xq, wq, xs, ws)
    check(out, *ref_blockwise(xq, wq, xs, ws, 256, 256, 256), device)
    # higher-rank a keeps its leading dims
    out3 = matmul_fp8_block(xq.view(1, M, K), wq, xs, ws)
    assert out3.shape == (1, M, N) and torch.equal(out3[0], out)


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", [(7, 520, 640), (130, 136, 208)])
def test_matmul_fp8_block_dot_out_dtype(device, dt, M, N, K):
    """dot_out_dtype is the result's dtype; the sums stay float32 (on CUDA the fp16 / fp32 results
    come from the portable kernel)."""
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_grid(cdiv(M, 128), cdiv(K, 128), device), rand_grid(cdiv(N, 128), cdiv(K, 128), device)
    out = matmul_fp8_block(xq, wq, xs, ws, 128, 128, 128, dot_out_dtype=dt)
    check(out, *ref_blockwise(xq, wq, xs, ws, 128, 128, 128), device, dt)
    out3 = torch.ops.triton.matmul_fp8_block(xq.view(1, M, K), wq, xs, ws, 128, 128, 128, dt)
    assert out3.shape == (1, M, N) and torch.equal(out3[0], out)


def test_blockwise_odd_blocks(device):
    M, N, K = 50, 72, 200
    bm, bn, bk = 16, 24, 40
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_grid(cdiv(M, bm), cdiv(K, bk), device), rand_grid(cdiv(N, bn), cdiv(K, bk), device)
    if torch.device(device).type == "cuda":
        with pytest.raises(ValueError, match="multiples of 128"):
            ops.f8f8bf16_blockwise(xq, wq, xs, ws, bm, bn, bk)
        return
    out = ops.f8f8bf16_blockwise(xq, wq, xs, ws, bm, bn, bk)
    check(out, *ref_blockwise(xq, wq, xs, ws, bm, bn, bk), device)


def test_blockwise_block_m_any_on_every_device(device):
    M, N, K = 100, 256, 512
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    # block_m 32 (expanded per row on CUDA), 256 x 256 weight blocks (expanded to 128 x 128)
    xs, ws = rand_grid(cdiv(M, 32), K // 256, device), rand_grid(cdiv(N, 256), K // 256, device)
    out = ops.f8f8bf16_blockwise(xq, wq, xs, ws, 32, 256, 256)
    check(out, *ref_blockwise(xq, wq, xs, ws, 32, 256, 256), device)


def test_groupwise_from_the_quantizers(device):
    # The spec's producers: 1 x 128 activation groups, 128 x 128 weight blocks, both MN-major.
    M, N, K = 33, 256, 512
    x = torch.randn(M, K, device=device)
    w = torch.randn(N, K, device=device)
    xq, xs = quantize_fp8_group(x, 128, k_major=False)
    wq, ws = quantize_fp8_block(w, 128, 128, k_major=False)
    assert xs.shape == (K // 128, M) and ws.shape == (K // 128, N // 128)
    out = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    check(out, *ref_groupwise(xq, wq, xs, ws), device)
    rel = (out.float() - x @ w.T).norm() / (x @ w.T).norm()
    assert rel < 0.1


def test_groupwise_non_contiguous_scales(device):
    M, N, K = 12, 256, 256
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs = rand_grid(M, K // 128, device).t()  # [K/128, M] view of a K-major buffer
    ws = rand_grid(N // 128, K // 128, device).t()
    out = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    check(out, *ref_groupwise(xq, wq, xs, ws), device)


def test_empty_dims(device):
    xq, wq = rand_fp8((0, 256), device), rand_fp8((128, 256), device)
    assert ops.f8f8bf16_groupwise(xq, wq, rand_grid(2, 0, device), rand_grid(2, 1, device)).shape == (0, 128)
    xq = rand_fp8((3, 0), device)
    out = ops.f8f8bf16_groupwise(xq, rand_fp8((8, 0), device), rand_grid(0, 3, device), rand_grid(0, 1, device))
    assert out.shape == (3, 8) and torch.all(out == 0)


def _grouped_case(device, sizes, N=256, K=256, extra=5, quantizer=True):
    G, total = len(sizes), sum(sizes) + extra
    ms = torch.tensor(sizes, dtype=torch.int64, device=device)
    wq = rand_fp8((G, N, K), device)
    ws = rand_grid(G * cdiv(K, 128), cdiv(N, 128), device).view(G, cdiv(K, 128), cdiv(N, 128))
    if quantizer:
        xq, xs = quantize_fp8_group(torch.randn(total, K, device=device), 128, m_sizes=ms, k_major=False)
    else:
        xq, xs = rand_fp8((total, K), device), rand_grid(total, cdiv(K, 128), device)
    return xq, wq, xs, ws, ms


# empty, tiny and skewed groups; average group sizes on both sides of the 64-row bucket; 300
# groups: more than one step of the device-side scan
@pytest.mark.parametrize("sizes", [[0, 3, 1, 200], [7], [1000, 0, 0, 24], [0, 0], [1] * 300, [513, 2, 0, 130]])
def test_groupwise_grouped(device, grouped_kernel, sizes):
    xq, wq, xs, ws, ms = _grouped_case(device, sizes)
    out = ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)
    check_grouped(out, xq, wq, xs, ws, sizes, device)
    o2 = torch.empty_like(out)
    assert matmul_f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms.to(torch.int32), output=o2) is o2
    assert torch.equal(o2, out)


def test_groupwise_grouped_n_not_multiple(device, grouped_kernel):
    sizes = [5, 17]
    xq, wq, xs, ws, ms = _grouped_case(device, sizes, N=136, K=384, extra=0, quantizer=False)
    check_grouped(ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms), xq, wq, xs, ws, sizes, device)


@requires_cuda
# (2048, 256, 16384): K long enough for the swizzle-8 rule of fp8_blockwise_configs.h
@pytest.mark.parametrize("M,N,K", [(4096, 384, 1024), (64, 2112, 7168), (65, 256, 16384), (2048, 256, 16384)])
def test_cuda_large_groupwise(M, N, K):
    # both table rows (M <= 64: the 64-row ping-pong one), and a long K
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_grid(K // 128, M, "cuda"), rand_grid(K // 128, cdiv(N, 128), "cuda")
    check(ops.f8f8bf16_groupwise(xq, wq, xs, ws), *ref_groupwise(xq, wq, xs, ws), "cuda")


@requires_cuda
@pytest.mark.parametrize("M", [8, 7])  # M % 4 != 0: the x scales are copied into a padded buffer
def test_cuda_graph_capture_groupwise(M):
    N, K = 256, 512
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_grid(K // 128, M, "cuda"), rand_grid(K // 128, 2, "cuda")
    eager = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.f8f8bf16_groupwise(xq, wq, xs, ws)  # warm-up outside the capture
        with torch.cuda.graph(g, stream=s):
            out = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    torch.cuda.current_stream().wait_stream(s)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


def _table_rows(header):
    """The row ids of a CUTLASS config table (its X(id, ...) lines)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "csrc/gemm/kernels" / header).read_text()
    return [int(r) for r in re.findall(r"^\s*X\((\d+),", text, re.M)]


@requires_cuda
@pytest.mark.parametrize("row", _table_rows("fp8_blockwise_grouped_configs.h"))
def test_cuda_grouped_rows(monkeypatch, row):
    # every row of fp8_blockwise_grouped_configs.h, forced, on groups of unequal sizes
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", str(row))
    sizes = [130, 0, 7, 64]
    xq, wq, xs, ws, ms = _grouped_case("cuda", sizes, N=384, K=512)
    check_grouped(ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms), xq, wq, xs, ws, sizes, "cuda")


WGMMA_ROW = str(len(_table_rows("fp8_blockwise_grouped_configs.h")))  # the row after the CUTLASS rows


@requires_cuda
@pytest.mark.parametrize(
    "sizes,N,K",
    [
        ([130, 0, 7, 64], 384, 512),
        ([0, 3, 1, 200], 256, 256),  # empty and tiny groups
        ([1] * 300, 256, 384),  # many one-row groups
        ([2048, 1000, 0, 2304], 512, 1024),  # 18 M tiles: a full band of 16 and a partial one
        ([5, 17], 136, 384),  # N not a multiple of the tile
        ([300, 41], 256, 400),  # K not a multiple of 128: the last K block is partial
    ],
)
def test_cuda_grouped_wgmma(monkeypatch, sizes, N, K):
    # mslk's wgmma kernel, forced: against the float64 reference, and bit for bit against the
    # CUTLASS row of the same tile (128 x 128 cooperative, no cluster), which promotes the same way
    xq, wq, xs, ws, ms = _grouped_case("cuda", sizes, N=N, K=K, quantizer=K % 128 == 0)
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", WGMMA_ROW)
    out = ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)
    check_grouped(out, xq, wq, xs, ws, sizes, "cuda")
    assert torch.all(out[sum(sizes):] == 0)
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", "2")
    assert torch.equal(out, ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms))


@requires_cuda
@pytest.mark.parametrize("row", _table_rows("fp8_blockwise_configs.h"))
@pytest.mark.parametrize("swizzle", [None, "8"])
def test_cuda_dense_rows(monkeypatch, row, swizzle):
    # every row of fp8_blockwise_configs.h, forced, N and M not multiples of the tile
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_CONFIG", str(row))
    if swizzle:
        monkeypatch.setenv("MSLK_GEMM_SWIZZLE", swizzle)
    M, N, K = 300, 392, 640
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_grid(K // 128, M, "cuda"), rand_grid(K // 128, cdiv(N, 128), "cuda")
    check(ops.f8f8bf16_groupwise(xq, wq, xs, ws), *ref_groupwise(xq, wq, xs, ws), "cuda")


@requires_cuda
# the default pick (mslk's wgmma kernel at these group sizes), mslk's kernel forced, a CUTLASS row
@pytest.mark.parametrize("row", [None, WGMMA_ROW, "2"])
def test_cuda_graph_capture_grouped(monkeypatch, row):
    # M_sizes stays on the GPU: the captured graph reads it at replay, so new sizes written into
    # the same tensor take effect without a re-capture
    if row is not None:
        monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", row)
    sizes = [40, 0, 300, 9]
    xq, wq, xs, ws, ms = _grouped_case("cuda", sizes, N=256, K=384, quantizer=False)
    eager = ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)
    g = torch.cuda.CUDAGraph()
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)  # warm-up outside the capture
        with torch.cuda.graph(g, stream=st):
            out = ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)
    torch.cuda.current_stream().wait_stream(st)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
    ms.copy_(torch.tensor([0, 100, 2, 200]))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms))
