"""The decode-shape kernel of the block/group-scaled FP8 GEMMs (M <= 16 on CUDA): every token
count of its two tile widths, K splits forced and planned, strided operands and scale views, the
CUTLASS kernel on the same calls (MSLK_FP8_BLOCKWISE_DECODE=off), graph capture with a split."""

import pytest
import torch

from test.conftest import requires_cuda
from test.gemm.fp8_blockwise_reference import cdiv, check, rand_fp8, rand_grid, ref_blockwise, ref_groupwise

ops = torch.ops.mslk
pytestmark = requires_cuda


def groupwise_inputs(M, N, K, seed=0):
    torch.manual_seed(seed)
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_grid(cdiv(K, 128), M, "cuda"), rand_grid(cdiv(K, 128), cdiv(N, 128), "cuda")
    return xq, wq, xs, ws


@pytest.mark.parametrize("mode", ["auto", "off"])
@pytest.mark.parametrize("M", [1, 2, 7, 8, 9, 16])
@pytest.mark.parametrize("N,K", [(136, 384), (2112, 7168), (256, 208), (8, 16), (1000, 1040)])
def test_groupwise_small_m(monkeypatch, mode, M, N, K):
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_DECODE", mode)
    xq, wq, xs, ws = groupwise_inputs(M, N, K)
    check(ops.f8f8bf16_groupwise(xq, wq, xs, ws), *ref_groupwise(xq, wq, xs, ws), "cuda")


@pytest.mark.parametrize("splits", ["1", "3", "7", "65535"])
def test_forced_splits_deterministic(monkeypatch, splits):
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_DECODE_SPLITS", splits)
    xq, wq, xs, ws = groupwise_inputs(16, 640, 2944)  # 23 K blocks: uneven splits, a short last one
    out = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    check(out, *ref_groupwise(xq, wq, xs, ws), "cuda")
    assert torch.equal(out, ops.f8f8bf16_groupwise(xq, wq, xs, ws))  # fixed summation order


def test_long_k_needs_splits(monkeypatch):
    # 160 K blocks: more than one split's scale table holds, so the plan splits even when forced to 1
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_DECODE_SPLITS", "1")
    xq, wq, xs, ws = groupwise_inputs(3, 384, 20480)
    check(ops.f8f8bf16_groupwise(xq, wq, xs, ws), *ref_groupwise(xq, wq, xs, ws), "cuda")


def test_strided_operands_and_scales():
    M, N, K = 5, 300, 1024
    torch.manual_seed(1)
    xq = rand_fp8((M, K + 64), "cuda")[:, 32:32 + K]  # row stride K + 64, base 32 bytes in
    wq = rand_fp8((N, K + 16), "cuda")[:, :K]
    xs = rand_grid(M, K // 128, "cuda").t()  # [K/128, M] with strides (1, K/128)
    ws = rand_grid(cdiv(N, 128) + 1, K // 128, "cuda")[1:].t()  # a transposed slice
    assert not xq.is_contiguous() and not xs.is_contiguous() and not ws.is_contiguous()
    check(ops.f8f8bf16_groupwise(xq, wq, xs, ws), *ref_groupwise(xq, wq, xs, ws), "cuda")


@pytest.mark.parametrize("M", [1, 16])
def test_blockwise_blocks_expanded(M):
    # block_m = 128 and 256-wide blocks: the grids are expanded to the kernel's per-row / per-128 ones
    N, K = 520, 640
    torch.manual_seed(2)
    xq, wq = rand_fp8((M, K), "cuda"), rand_fp8((N, K), "cuda")
    xs, ws = rand_grid(1, cdiv(K, 256), "cuda"), rand_grid(cdiv(N, 256), cdiv(K, 256), "cuda")
    out = ops.f8f8bf16_blockwise(xq, wq, xs, ws, 256, 256, 256)
    check(out, *ref_blockwise(xq, wq, xs, ws, 256, 256, 256), "cuda")


def test_forced_on_refuses_large_m(monkeypatch):
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_DECODE", "on")
    xq, wq, xs, ws = groupwise_inputs(17, 128, 256)
    with pytest.raises(ValueError, match=r"MSLK_FP8_BLOCKWISE_DECODE=on needs M <= 16.*M=17"):
        ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    monkeypatch.setenv("MSLK_FP8_BLOCKWISE_DECODE", "fast")
    with pytest.raises(ValueError, match=r"MSLK_FP8_BLOCKWISE_DECODE must be auto, on or off"):
        ops.f8f8bf16_groupwise(xq[:4], wq, xs[:, :4], ws)


def test_graph_capture_with_splits():
    xq, wq, xs, ws = groupwise_inputs(1, 2112, 7168)
    eager = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.f8f8bf16_groupwise(xq, wq, xs, ws)
        with torch.cuda.graph(g, stream=s):
            out = ops.f8f8bf16_groupwise(xq, wq, xs, ws)
    torch.cuda.current_stream().wait_stream(s)
    xq.copy_(rand_fp8(tuple(xq.shape), "cuda"))  # the replay reads the new tokens
    g.replay()
    torch.cuda.synchronize()
    check(out, *ref_groupwise(xq, wq, xs, ws), "cuda")
    assert not torch.equal(out, eager)
