"""The tile walk of the CUTLASS grouped GEMMs (MSLK_GEMM_RASTER, MSLK_GEMM_SWIZZLE) only reorders
the tiles: every grouped family gives the same bits under every walk, including swizzles that pad
a group's tile grid past its rows and columns (the padding tiles must store nothing). Groups of
unequal sizes, an empty one, tails in M and N."""

import pytest
import torch

from test.gemm.bf16_grouped_reference import assert_close, rand_bf16, ref_stacked
from test.gemm.fp8_blockwise_reference import check_grouped, rand_fp8, rand_grid
from test.gemm.fp8_gemm_reference import rand_scale

ops = torch.ops.mslk
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

SIZES = [260, 0, 7, 64, 133]  # 3 M tiles: swizzle 8 pads to 8; 7 and 133: x-scale segments % 4 != 0
WALKS = [("m", "1"), ("n", "1"), ("m", "8"), ("n", "8"), ("n", "2")]


def _under(monkeypatch, walk, fn):
    raster, swizzle = walk
    monkeypatch.setenv("MSLK_GEMM_RASTER", raster)
    monkeypatch.setenv("MSLK_GEMM_SWIZZLE", swizzle)
    out = fn()
    monkeypatch.delenv("MSLK_GEMM_RASTER")
    monkeypatch.delenv("MSLK_GEMM_SWIZZLE")
    return out


def _groupwise_case(N=392, K=512):
    G, total = len(SIZES), sum(SIZES) + 3
    ms = torch.tensor(SIZES, dtype=torch.int64, device="cuda")
    xq, wq = rand_fp8((total, K), "cuda"), rand_fp8((G, N, K), "cuda")
    xs = rand_grid(total, K // 128, "cuda")
    ws = rand_grid(G * (K // 128), -(-N // 128), "cuda").view(G, K // 128, -1)
    return xq, wq, xs, ws, ms


def _grouped_rows():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "csrc/gemm/kernels/fp8_blockwise_grouped_configs.h").read_text()
    return [int(i) for i in re.findall(r"^\s*X\((\d+),", text, re.M)]


@pytest.mark.parametrize("row", _grouped_rows())
@pytest.mark.parametrize("walk", WALKS)
def test_groupwise_grouped_walks(monkeypatch, row, walk):
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", str(row))
    xq, wq, xs, ws, ms = _groupwise_case()
    base = ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms)
    out = _under(monkeypatch, walk, lambda: ops.f8f8bf16_groupwise_grouped(xq, wq, xs, ws, ms))
    assert torch.equal(out, base)
    check_grouped(out, xq, wq, xs, ws, SIZES, "cuda")


@pytest.mark.parametrize("walk", WALKS)
def test_rowwise_grouped_walks(monkeypatch, walk):
    N, K = 392, 256
    total = sum(SIZES) + 3
    ms = torch.tensor(SIZES, dtype=torch.int32, device="cuda")
    xq, wq = rand_fp8((total, K), "cuda"), rand_fp8((len(SIZES), N, K), "cuda")
    xr, wr = rand_scale(total, "cuda"), rand_scale(N, "cuda", (len(SIZES),))
    base = ops.f8f8bf16_rowwise_grouped_stacked(xq, wq, xr, wr, ms)
    out = _under(monkeypatch, walk, lambda: ops.f8f8bf16_rowwise_grouped_stacked(xq, wq, xr, wr, ms))
    assert torch.equal(out, base)
    assert torch.all(out[sum(SIZES):] == 0)


@pytest.mark.parametrize("swizzle", ["2", "8"])
def test_bf16_grouped_swizzle(monkeypatch, swizzle):
    monkeypatch.setenv("MSLK_BF16_GROUPED_KERNEL", "cutlass")
    N, K = 264, 200
    x, w = rand_bf16((sum(SIZES) + 5, K), "cuda"), rand_bf16((len(SIZES), N, K), "cuda")
    ms = torch.tensor(SIZES, dtype=torch.int32, device="cuda")
    base = ops.bf16bf16bf16_grouped_stacked(x, w, ms)
    out = _under(monkeypatch, ("m", swizzle), lambda: ops.bf16bf16bf16_grouped_stacked(x, w, ms))
    assert torch.equal(out, base)
    assert_close(out, ref_stacked(x, w, SIZES), K)
