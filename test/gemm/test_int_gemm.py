"""INT8 x INT8 -> BF16 GEMMs (i8i8bf16, i8i8bf16_dynamic and the mslk.gemm.triton.int8_gemm
wrappers) against a float64 reference, on every device the tests see (the exact CPU reference;
the CUTLASS sm90 kernel on Hopper)."""

import pytest
import torch

from mslk.gemm.triton.int8_gemm import i8i8bf16_dynamic_triton, i8i8bf16_triton
from test.conftest import requires_cuda

ops = torch.ops.mslk
MS = [1, 2, 7, 16, 17, 64, 1000]  # <= 16: the swap-AB row (out^T written as a column-major D); 17: the first past it
NK = [(136, 256), (100, 128), (264, 1024)]  # N not a multiple of the 128 tile (100: not of 8 either)


def rand_i8(shape, device, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-128, 128, shape, generator=g, dtype=torch.int8).to(device)


def ref(XQ, WQ, scale):
    # int32 sums are exact in float64 here (|sum| < 2^31); scale applied in float32, as the epilogue does
    acc = XQ.double().cpu() @ WQ.double().cpu().t()
    return (acc.float() * torch.tensor(scale, dtype=torch.float32)).bfloat16()


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("N,K", NK)
def test_i8i8bf16(device, M, N, K):
    XQ, WQ = rand_i8((M, K), device, M + K), rand_i8((N, K), device, N)
    out = ops.i8i8bf16(XQ, WQ, 0.0123)
    assert out.shape == (M, N) and out.dtype == torch.bfloat16 and out.device.type == device
    assert torch.equal(out.cpu(), ref(XQ, WQ, 0.0123))
    s = torch.tensor([0.0123], device=device)
    assert torch.equal(ops.i8i8bf16_dynamic(XQ, WQ, s), out)


@requires_cuda
@pytest.mark.parametrize("M", [1, 2, 7, 16])
@pytest.mark.parametrize("N", [8456, 8452])
def test_cuda_decode_many_tiles(M, N):
    # 133 weight-row tiles of 64 (more than one wave on 132 SMs: the persistent loop wraps) and 32
    # k-tiles (past the TMA ring's depth); N = 8452 is not a multiple of 8 (a padded temporary at M > 1)
    K = 4096
    XQ, WQ = rand_i8((M, K), "cuda", M), rand_i8((N, K), "cuda", N)
    expect = ref(XQ, WQ, 0.0123)
    assert torch.equal(ops.i8i8bf16(XQ, WQ, 0.0123).cpu(), expect)
    assert torch.equal(ops.i8i8bf16_dynamic(XQ, WQ, torch.tensor([0.0123], device="cuda")).cpu(), expect)


@pytest.mark.parametrize("M", [1, 7, 33])
@pytest.mark.parametrize("K", [1, 5, 24, 100, 1000])
def test_any_k(device, M, K):
    # K not a multiple of 16 (the CUDA kernel reads 16-byte rows: the operands are zero-padded along K);
    # strided rows too
    XQ, WQ = rand_i8((M, K + 3), device, M + K)[:, 3:], rand_i8((72, K), device, K)
    expect = ref(XQ, WQ, 0.03)
    assert torch.equal(ops.i8i8bf16(XQ, WQ, 0.03).cpu(), expect)
    assert torch.equal(ops.i8i8bf16_dynamic(XQ, WQ, torch.tensor([0.03], device=device)).cpu(), expect)


@pytest.mark.parametrize("split_k", [1, 2, 4])
def test_split_k_and_wrappers(device, split_k):
    XQ, WQ = rand_i8((33, 256), device, 1), rand_i8((72, 256), device, 2)
    expect = ref(XQ, WQ, 0.5)
    assert torch.equal(i8i8bf16_triton(XQ, WQ, 0.5, split_k).cpu(), expect)
    s = torch.tensor(0.5, device=device)  # a 0-dim scale is taken too
    assert torch.equal(i8i8bf16_dynamic_triton(XQ, WQ, s, split_k=split_k).cpu(), expect)


def test_extremes(device):
    # every product at +-128 * 127 or 128 * 128: the largest sums of the int32 accumulator
    K = 4096
    XQ = torch.full((3, K), -128, dtype=torch.int8, device=device)
    WQ = torch.stack([torch.full((K,), -128, dtype=torch.int8), torch.full((K,), 127, dtype=torch.int8)]).to(device)
    out = ops.i8i8bf16(XQ, WQ, 1.0)
    assert torch.equal(out.cpu(), ref(XQ, WQ, 1.0))
    assert out[0, 0].item() == float(128 * 128 * K)


def test_strided_operands(device):
    big = rand_i8((16, 320), device, 3)
    XQ, WQ = big[:5, 16:272], rand_i8((40, 256), device, 4)[::2]
    assert torch.equal(ops.i8i8bf16(XQ, WQ, 2.0).cpu(), ref(XQ, WQ, 2.0))
    XQ2 = big[:5, 1:257]  # a base that is not 16-byte aligned: copied on CUDA
    assert torch.equal(ops.i8i8bf16(XQ2, WQ, 2.0).cpu(), ref(XQ2, WQ, 2.0))


def test_empty(device):
    out = ops.i8i8bf16(rand_i8((0, 32), device, 5), rand_i8((4, 32), device, 6), 1.0)
    assert out.shape == (0, 4)
    out = ops.i8i8bf16(rand_i8((2, 0), device, 5), rand_i8((4, 0), device, 6), 1.0)
    assert out.shape == (2, 4) and not out.any()


def _bad(d):
    x, w = rand_i8((4, 32), d, 7), rand_i8((8, 32), d, 8)
    return [
        ((x.float(), w, 1.0), TypeError, "'XQ'"),
        ((x, w.to(torch.uint8), 1.0), TypeError, "'WQ'"),
        ((x[None], w, 1.0), ValueError, "'XQ'"),
        ((x, w[:, :16], 1.0), ValueError, "same K"),
        ((x[:, ::2], w[:, ::2], 1.0), ValueError, "'XQ'"),
        ((x, w, float("inf")), ValueError, "'scale'"),
        ((x, w, 1.0, 0), ValueError, "'split_k'"),
    ]


@pytest.mark.parametrize("i", range(7))
def test_errors(device, i):
    args, exc, match = _bad(device)[i]
    with pytest.raises(exc, match=match):
        ops.i8i8bf16(*args)


def test_dynamic_scale_errors(device):
    x, w = rand_i8((4, 32), device, 9), rand_i8((8, 32), device, 10)
    with pytest.raises(TypeError, match="'scale'"):
        ops.i8i8bf16_dynamic(x, w, torch.ones(1, device=device, dtype=torch.float64))
    with pytest.raises(ValueError, match="'scale'"):
        ops.i8i8bf16_dynamic(x, w, torch.ones(2, device=device))
    with pytest.raises(ValueError, match="'split_k'"):
        ops.i8i8bf16_dynamic(x, w, torch.ones(1, device=device), -1)


def test_opcheck(device):
    x, w = rand_i8((5, 64), device, 11), rand_i8((24, 64), device, 12)
    torch.library.opcheck(ops.i8i8bf16.default, (x, w, 0.25, 1))
    torch.library.opcheck(ops.i8i8bf16_dynamic.default, (x, w, torch.tensor([0.25], device=device), 2))


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    x, w = rand_i8((5, 64), device, 13), rand_i8((24, 64), device, 14)
    s = torch.tensor([0.25], device=device)

    def f(x, w, s):
        return ops.i8i8bf16(x, w, 0.25).float() + ops.i8i8bf16_dynamic(x, w, s * 2).float()

    assert torch.equal(f(x, w, s), torch.compile(f, fullgraph=True)(x, w, s))


@requires_cuda
def test_cuda_dynamic_scale_no_host_sync():
    x, w = rand_i8((64, 256), "cuda", 15), rand_i8((128, 256), "cuda", 16)
    s = torch.tensor([0.125], device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = ops.i8i8bf16_dynamic(x, w, s)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(out.cpu(), ref(x, w, 0.125))
