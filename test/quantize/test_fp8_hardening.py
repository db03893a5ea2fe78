"""Arguments at their limits: eps_opt=None and bad eps, huge block sizes / alignments, bad
m_sizes (rejected on the CPU, clamped on the device), scale_ub <= 0, scale_fp8_row ranks."""

import pytest
import torch

from mslk.quantize.triton import fp8_quantize as q
from test.conftest import requires_cuda

HUGE = 2**63 - 1


def bf16(*shape, device="cpu"):
    return torch.randn(*shape, device=device).to(torch.bfloat16)


def same(a, b):
    return torch.equal(a[0].view(torch.uint8), b[0].view(torch.uint8)) and torch.equal(a[1], b[1])


def test_eps_opt_none_is_default(device):
    x = bf16(6, 64, device=device)
    x[2] = 0
    got = torch.ops.triton.quantize_fp8_row(x, None, None, True, None, None, None)
    assert same(got, torch.ops.triton.quantize_fp8_row(x))
    assert same(got, q.quantize_fp8_row(x, eps_opt=1 / 512))
    assert same(q.quantize_fp8_row(x, eps_opt=None), got)


@pytest.mark.parametrize("eps", [float("inf"), float("nan"), -1.0, 0.0])
def test_eps_opt_rejected(device, eps):
    with pytest.raises(ValueError, match="quantize_fp8_row: argument 'eps_opt' must be positive and finite"):
        q.quantize_fp8_row(bf16(4, 8, device=device), eps_opt=eps)


def test_huge_tiles_rejected(device):
    x = bf16(4, 8, device=device)
    with pytest.raises(ValueError, match=r"argument 'align_rows_to' must be at most 2\*\*31, got 9223372036854775807"):
        q.quantize_fp8_row(x, align_rows_to=HUGE)
    for kw in ({"block_m": HUGE}, {"block_k": HUGE}):
        with pytest.raises(ValueError, match=rf"quantize_fp8_block: argument '{next(iter(kw))}' must be at most 2\*\*31"):
            q.quantize_fp8_block(x, **kw)
    xq, s = q.quantize_fp8_block(x, 4, 8)
    with pytest.raises(ValueError, match=r"dequantize_fp8_block: argument 'block_m' must be at most 2\*\*31"):
        torch.ops.mslk.dequantize_fp8_block(xq, s, HUGE, 8)
    # the largest accepted sizes still work: one tile covers everything
    xq, s = q.quantize_fp8_block(x, 2**31, 2**31)
    assert s.shape == (1, 1) and torch.isfinite(s).all()
    assert q.quantize_fp8_row(x, align_rows_to=2**20)[0].shape == (4, 2**20)


@pytest.mark.parametrize("sizes,msg", [([-4, 13], r"m_sizes\[0\] = -4"), ([5, -3, 7], r"m_sizes\[1\] = -3"),
                                       ([10, 10], r"sum to at most x.size\(0\) = 16, got more by m_sizes\[1\] = 10")])
@pytest.mark.parametrize("k_major", [False, True])
def test_bad_m_sizes_rejected_on_cpu(sizes, msg, k_major):
    x = bf16(16, 256)
    with pytest.raises(ValueError, match="quantize_fp8_group: argument 'm_sizes' must .*" + msg):
        q.quantize_fp8_group(x, 128, m_sizes=torch.tensor(sizes), k_major=k_major)


@requires_cuda
@pytest.mark.parametrize("sizes,clamped", [([-4, 13], [0, 13]), ([5, -3, 7], [5, 0, 7]), ([10, 10], [10, 6]),
                                           ([40, 3], [16, 0])])
def test_bad_m_sizes_clamped_on_cuda(sizes, clamped):
    # Device sizes are not read on the host: negative sizes count as 0, rows past the end drop.
    x = bf16(16, 256)
    got = q.quantize_fp8_group(x.cuda(), 128, m_sizes=torch.tensor(sizes, device="cuda"), k_major=False)
    ref = q.quantize_fp8_group(x, 128, m_sizes=torch.tensor(clamped), k_major=False)
    assert torch.isfinite(got[1]).all()
    assert same((got[0].cpu(), got[1].cpu()), ref)


@pytest.mark.parametrize("bad", [0.0, -2.0, float("nan")])
def test_scale_ub_non_positive_rejected(device, bad):
    x = bf16(8, 256, device=device)
    ub = torch.tensor([bad])  # on the CPU: checked whatever the input's device
    for fn in (q.quantize_fp8_row, q.quantize_fp8_block, q.quantize_fp8_group):
        with pytest.raises(ValueError, match="argument 'scale_ub' must be positive"):
            fn(x, scale_ub=ub)


def test_scale_fp8_row_ranks():
    acc = torch.randn(4, 6)
    with pytest.raises(ValueError, match=r"argument 'x_scale' must have shape \[4\], got \(4, 1\)"):
        q.scale_fp8_row(acc, torch.rand(4, 1), torch.rand(6))
    with pytest.raises(ValueError, match=r"argument 'w_scale' must have shape \[6\], got \(\)"):
        q.scale_fp8_row(acc, torch.rand(4), torch.tensor(2.0))
    with pytest.raises(ValueError, match="argument 'a' must have 2 dimensions"):
        q.scale_fp8_row(torch.randn(2, 4, 6), torch.rand(4), torch.rand(6))
