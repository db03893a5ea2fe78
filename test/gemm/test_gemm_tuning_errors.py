"""The CUTLASS GEMMs' tuning variables (read by the CUDA glue through env.h): a forced config row
that does not exist, or that cannot take the problem, is a ValueError naming the variable, never
a silent fallback to another (far slower) kernel; a malformed swizzle is a ValueError too."""

import pytest
import torch

from test.gemm.bf16_grouped_reference import rand_bf16

ops = torch.ops.mslk

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the variables are read by the CUDA glue")


def rand_fp8(shape):
    return torch.randn(shape, device="cuda").clamp(-4, 4).to(torch.float8_e4m3fn)


def scales(n):
    return torch.rand(n, device="cuda") + 0.5


def bf16_stacked(K=64):
    x, w = rand_bf16((16, K), "cuda"), rand_bf16((2, 64, K), "cuda")
    return x, w, torch.tensor([8, 8], dtype=torch.int32, device="cuda")


@pytest.mark.parametrize("value", ["99", "-1", "abc", "1.5"])
def test_bf16_grouped_row_that_does_not_exist(monkeypatch, value):
    monkeypatch.setenv("MSLK_BF16_GROUPED_CONFIG", value)
    with pytest.raises(ValueError, match=f"MSLK_BF16_GROUPED_CONFIG must be a whole number from 0 to .*got '{value}'"):
        ops.bf16bf16bf16_grouped_stacked(*bf16_stacked())


def test_bf16_grouped_row_that_cannot_take_the_problem(monkeypatch):
    monkeypatch.setenv("MSLK_BF16_GROUPED_CONFIG", "0")
    with pytest.raises(ValueError, match="MSLK_BF16_GROUPED_CONFIG=0 forces a row that cannot take"):
        ops.bf16bf16bf16_grouped_stacked(*bf16_stacked(K=60))  # K % 8 != 0: no TMA


def test_bf16_wgrad_row_that_does_not_exist(monkeypatch):
    x, _, ms = bf16_stacked()
    dy = rand_bf16((16, 64), "cuda")
    monkeypatch.setenv("MSLK_BF16_WGRAD_CONFIG", "7")
    with pytest.raises(ValueError, match="MSLK_BF16_WGRAD_CONFIG must be a whole number from 0 to 1"):
        ops.bf16bf16bf16_grouped_wgrad(dy, x, ms)


def test_simt_does_not_read_the_row(monkeypatch):
    # MSLK_BF16_GROUPED_KERNEL=simt never reads the CUTLASS row variables.
    monkeypatch.setenv("MSLK_BF16_GROUPED_KERNEL", "simt")
    monkeypatch.setenv("MSLK_BF16_GROUPED_CONFIG", "99")
    ops.bf16bf16bf16_grouped_stacked(*bf16_stacked())


def fp8_stacked(K=128):
    G, m, N = 2, 8, 64
    return (rand_fp8((G * m, K)), rand_fp8((G, N, K)), scales(G * m), scales(G * N),
            torch.tensor([m, m], dtype=torch.int64, device="cuda"))


def test_fp8_grouped_row_that_does_not_exist(monkeypatch):
    monkeypatch.setenv("MSLK_FP8_GROUPED_CONFIG", "4")
    with pytest.raises(ValueError, match="MSLK_FP8_GROUPED_CONFIG must be a whole number from 0 to 3"):
        ops.f8f8bf16_rowwise_grouped_stacked(*fp8_stacked())


def test_fp8_grouped_row_that_cannot_take_the_problem(monkeypatch):
    monkeypatch.setenv("MSLK_FP8_GROUPED_CONFIG", "0")
    with pytest.raises(ValueError, match="MSLK_FP8_GROUPED_CONFIG=0 forces a row that cannot take"):
        ops.f8f8bf16_rowwise_grouped_stacked(*fp8_stacked(K=40))  # K % 16 != 0: no TMA


def blockwise_grouped(N=256, K=256):
    G, m = 2, 8
    return (rand_fp8((G * m, K)), rand_fp8((G, N, K)), scales(G * m * (K // 128)).view(G * m, K // 128),
            scales(G * (K // 128) * ((N + 127) // 128)).view(G, K // 128, (N + 127) // 128),
            torch.tensor([m, m], dtype=torch.int64, device="cuda"))


def test_fp8_blockwise_grouped_row_errors(monkeypatch):
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", "4")
    with pytest.raises(ValueError, match="MSLK_FP8_BLOCKWISE_GROUPED_CONFIG must be a whole number from 0 to 3"):
        ops.f8f8bf16_groupwise_grouped(*blockwise_grouped())
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", "0")
    with pytest.raises(ValueError, match="MSLK_FP8_BLOCKWISE_GROUPED_CONFIG=0 forces a row that cannot take"):
        ops.f8f8bf16_groupwise_grouped(*blockwise_grouped(N=132))  # N % 8 != 0: no TMA store
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", "3")  # mslk's wgmma kernel: TMA as well
    with pytest.raises(ValueError, match="MSLK_FP8_BLOCKWISE_GROUPED_CONFIG=3 forces a row that cannot take"):
        ops.f8f8bf16_groupwise_grouped(*blockwise_grouped(N=132))


def test_fp8_blockwise_row_that_does_not_exist(monkeypatch):
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_CONFIG", "2")
    xq, wq = rand_fp8((256, 256)), rand_fp8((256, 256))
    with pytest.raises(ValueError, match="MSLK_FP8_BLOCKWISE_CONFIG must be a whole number from 0 to 1"):
        ops.f8f8bf16_groupwise(xq, wq, scales(512).view(2, 256), scales(4).view(2, 2))


def test_fp8_rowwise_tile_errors(monkeypatch):
    monkeypatch.setenv("MSLK_FP8_ROWWISE_TILE", "12")
    xq, wq = rand_fp8((256, 128)), rand_fp8((256, 128))
    with pytest.raises(ValueError, match="MSLK_FP8_ROWWISE_TILE must be a whole number from 0 to 11"):
        ops.f8f8bf16_rowwise(xq, wq, scales(256), scales(256))
    monkeypatch.setenv("MSLK_FP8_ROWWISE_TILE", "0")
    monkeypatch.setenv("MSLK_FP8_GEMM_KERNEL", "cutlass")
    x40, w40 = rand_fp8((256, 40)), rand_fp8((256, 40))  # K % 16 != 0: no TMA
    with pytest.raises(ValueError, match="MSLK_FP8_ROWWISE_TILE=0 forces a row that cannot take"):
        ops.f8f8bf16_rowwise(x40, w40, scales(256), scales(256))
    monkeypatch.setenv("MSLK_FP8_GEMM_KERNEL", "auto")
    with pytest.raises(ValueError, match="MSLK_FP8_ROWWISE_TILE=0 forces a row that cannot take"):
        ops.f8f8bf16_rowwise(x40, w40, scales(256), scales(256))


def test_swizzle_errors(monkeypatch):
    monkeypatch.setenv("MSLK_GEMM_SWIZZLE", "3")
    with pytest.raises(ValueError, match=r"MSLK_GEMM_SWIZZLE must be 1, 2, 4 or 8 \(or unset\), got '3'"):
        ops.bf16bf16bf16_grouped_stacked(*bf16_stacked())


def test_raster_errors(monkeypatch):
    monkeypatch.setenv("MSLK_GEMM_RASTER", "x")
    with pytest.raises(ValueError, match=r"MSLK_GEMM_RASTER must be m or n \(or unset\), got 'x'"):
        ops.f8f8bf16_rowwise_grouped_stacked(*fp8_stacked())
