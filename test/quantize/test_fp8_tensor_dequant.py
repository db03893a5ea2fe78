"""quantize_fp8_tensor and the dequantizers."""

import pytest
import torch

from mslk.quantize.triton.fp8_quantize import (
    dequantize_fp8_block,
    dequantize_fp8_row,
    quantize_fp8_block,
    quantize_fp8_row,
    quantize_fp8_tensor,
    scale_fp8_row,
    triton_quantize_fp8_tensor,
)
from test.conftest import requires_cuda
from test.quantize.fp8_reference import FP8_MAX, check_dequant_error, e4m3, rand

DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7, 13), (64, 4096), (2, 3, 5, 8), (1000, 1)])
def test_tensor(device, dtype, shape):
    x = rand(shape, dtype, device)
    xq, scale = quantize_fp8_tensor(x)
    assert scale.shape == () and xq.shape == x.shape
    amax = x.double().abs().max().float().cpu()
    escale = amax / FP8_MAX
    torch.testing.assert_close(scale.cpu(), escale, rtol=0, atol=0)
    exq = e4m3(x.float().cpu() * (torch.full_like(amax, FP8_MAX) / amax))
    assert torch.equal(xq.cpu().view(torch.uint8), exq.view(torch.uint8))
    check_dequant_error(xq, scale.expand(shape), x)


def test_tensor_strided_empty(device):
    x = rand((40, 300), torch.bfloat16, device)[:, 10:266]
    xq, scale = triton_quantize_fp8_tensor(x)
    xq2, scale2 = quantize_fp8_tensor(x.contiguous())
    assert torch.equal(xq.cpu().view(torch.uint8), xq2.cpu().view(torch.uint8)) and torch.equal(scale, scale2)
    xq, scale = quantize_fp8_tensor(torch.empty(0, 16, device=device))
    assert xq.shape == (0, 16) and scale.item() == pytest.approx(1e-12 / FP8_MAX)


@pytest.mark.parametrize("shape", [(5, 64), (3, 7, 100), (1, 1), (4, 0)])
def test_dequant_row(device, shape):
    x = rand(shape, torch.bfloat16, device)
    xq, scale = quantize_fp8_row(x)
    y = dequantize_fp8_row(xq, scale)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape
    expected = (xq.double().cpu() * scale.double().cpu()[..., None]).to(torch.bfloat16)
    assert torch.equal(y.cpu(), expected)


@pytest.mark.parametrize("M,K,bm,bk", [(300, 520, 256, 256), (64, 64, 16, 32), (5, 3, 2, 2)])
def test_dequant_block(device, M, K, bm, bk):
    x = rand((M, K), torch.float32, device)
    xq, scale = quantize_fp8_block(x, bm, bk)
    y = dequantize_fp8_block(xq, scale, bm, bk)
    full = scale.cpu().repeat_interleave(bm, 0)[:M].repeat_interleave(bk, 1)[:, :K]
    assert torch.equal(y.cpu(), (xq.double().cpu() * full.double()).to(torch.bfloat16))
    check_dequant_error(xq, full, x)


def test_scale_fp8_row(device):
    acc = torch.randn(8, 16, device=device)
    xs, ws = torch.rand(8, device=device), torch.rand(16, device=device)
    torch.testing.assert_close(scale_fp8_row(acc, xs, ws), acc * xs[:, None] * ws[None, :])


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_dequant_cuda_equals_cpu(dtype):
    x = rand((8192, 4096), dtype, "cuda")
    g, c = quantize_fp8_tensor(x), quantize_fp8_tensor(x.cpu())
    assert torch.equal(g[0].cpu().view(torch.uint8), c[0].view(torch.uint8)) and torch.equal(g[1].cpu(), c[1])
    q, s = quantize_fp8_row(x)
    assert torch.equal(dequantize_fp8_row(q, s).cpu(), dequantize_fp8_row(q.cpu(), s.cpu()))
    q, s = quantize_fp8_block(x, 128, 128)
    assert torch.equal(dequantize_fp8_block(q, s, 128, 128).cpu(),
                       dequantize_fp8_block(q.cpu(), s.cpu(), 128, 128))


@pytest.mark.parametrize("fn", [quantize_fp8_tensor, triton_quantize_fp8_tensor])
def test_tensor_any_layout_keeps_memory_format(device, fn):
    x = rand((2, 8, 3, 4, 5), torch.bfloat16, device).contiguous(memory_format=torch.channels_last_3d)
    xq, scale = fn(x)
    exq, escale = quantize_fp8_tensor(x.contiguous())
    assert xq.shape == x.shape and xq.is_contiguous(memory_format=torch.channels_last_3d)
    assert torch.equal(scale, escale) and torch.equal(xq.view(torch.uint8), exq.view(torch.uint8))
    t = rand((12, 7), torch.float32, device).t()
    xq, scale = fn(t)
    assert xq.stride() == t.stride() and torch.equal(scale, quantize_fp8_tensor(t.contiguous())[1])
