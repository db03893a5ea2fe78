"""f8f8bf16_rowwise_preshuffle / f8f8f16_rowwise_preshuffle and mslk.quantize.shuffle.ck_preshuffle
on every device the tests see: the preshuffled weight is the row-major one (a contiguous copy), and
the ops give f8f8bf16_rowwise's / f8f8f16_rowwise's result bit for bit, within the float64 bound."""

import pytest
import torch

from mslk.quantize.shuffle import ck_preshuffle
from test.gemm.fp8_gemm_reference import check, rand_fp8, rand_scale

ops = torch.ops.mslk


@pytest.mark.parametrize("M,N,K", [(1, 136, 256), (7, 64, 128), (300, 264, 512)])
@pytest.mark.parametrize("fast", [True, False])
def test_preshuffle_matches_rowwise(device, M, N, K, fast):
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_scale(M, device), rand_scale(N, device)
    bias = (torch.randn(N, dtype=torch.float64) * 4).bfloat16().to(device)
    wp = ck_preshuffle(wq)
    assert wp.shape == wq.shape and wp.dtype == wq.dtype and wp.is_contiguous()
    assert wp.data_ptr() != wq.data_ptr() and torch.equal(wp.view(torch.uint8), wq.view(torch.uint8))
    out = ops.f8f8bf16_rowwise_preshuffle(xq, wp, xs, ws, bias, fast)
    assert out.dtype == torch.bfloat16 and out.shape == (M, N)
    assert torch.equal(out, ops.f8f8bf16_rowwise(xq, wq, xs, ws, bias, fast))
    check(out, xq, wq, xs, ws, bias, fast)
    o16 = ops.f8f8f16_rowwise_preshuffle(xq, wp, xs, ws, None, fast)
    assert o16.dtype == torch.float16
    assert torch.equal(o16, ops.f8f8f16_rowwise(xq, wq, xs, ws, None, fast))
    check(o16, xq, wq, xs, ws, None, fast)


def test_preshuffle_of_a_transposed_view(device):
    wq = rand_fp8((128, 96), device).t()  # [96, 128] with strides (1, 96)
    wp = ck_preshuffle(wq, NXdl=32)
    assert wp.is_contiguous() and torch.equal(wp.view(torch.uint8), wq.contiguous().view(torch.uint8))


def test_errors(device):
    w = rand_fp8((16, 32), device)
    with pytest.raises(TypeError, match=r"ck_preshuffle: argument 'src' is float8_e4m3fnuz, the ROCm FP8 format"):
        ck_preshuffle(w.float().to(torch.float8_e4m3fnuz))
    with pytest.raises(TypeError, match=r"ck_preshuffle: argument 'src' must be torch.float8_e4m3fn, got torch.bfloat16"):
        ck_preshuffle(w.bfloat16())
    with pytest.raises(ValueError, match=r"argument 'src' must be a 2-D \[N, K\] weight tensor, got \(2, 16, 32\)"):
        ck_preshuffle(w.expand(2, 16, 32))
    with pytest.raises(ValueError, match=r"argument 'NXdl' must be a positive integer, got 0"):
        ck_preshuffle(w, NXdl=0)
    xq, xs, ws = rand_fp8((4, 32), device), rand_scale(4, device), rand_scale(16, device)
    with pytest.raises(ValueError, match=r"f8f8bf16_rowwise_preshuffle: .*'w_scale'"):
        ops.f8f8bf16_rowwise_preshuffle(xq, w, xs, ws[:8])


def test_compile_fullgraph(device):
    # opcheck: test_fp8_rowwise_compile.py's op list
    torch._dynamo.reset()
    xq, wq = rand_fp8((5, 64), device), rand_fp8((32, 64), device)
    xs, ws = rand_scale(5, device), rand_scale(32, device)
    f = torch.compile(lambda a, b, c, d: ops.f8f8bf16_rowwise_preshuffle(a, ck_preshuffle(b), c, d), fullgraph=True,
                      backend="aot_eager")
    assert torch.equal(f(xq, wq, xs, ws), ops.f8f8bf16_rowwise(xq, wq, xs, ws))
