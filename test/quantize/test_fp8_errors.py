"""Bad inputs raise errors that name the argument and what was expected."""

import pytest
import torch

from mslk.quantize.triton import fp8_quantize as q
from test.conftest import requires_cuda


def bf16(*shape, device="cpu"):
    return torch.randn(*shape, device=device).to(torch.bfloat16)


@pytest.mark.parametrize("fn", [q.quantize_fp8_row, q.quantize_fp8_block, q.quantize_fp8_tensor, q.quantize_fp8_group])
def test_wrong_dtype(device, fn):
    x = torch.randint(0, 5, (8, 128), dtype=torch.int8, device=device)
    with pytest.raises(TypeError, match=r"argument '(a|x)' must have dtype BFloat16, Half, Float, got Char"):
        fn(x)


def test_last_dim_stride(device):
    x = bf16(128, 64, device=device).t()
    for fn in (q.quantize_fp8_row, q.quantize_fp8_block, q.quantize_fp8_group):
        with pytest.raises(ValueError, match="stride 1 in its last dimension"):
            fn(x)


def test_rank_and_sizes(device):
    with pytest.raises(ValueError, match=r"quantize_fp8_row: argument 'a' must have 1 to 64 dimensions"):
        q.quantize_fp8_row(torch.tensor(1.0, device=device))
    with pytest.raises(ValueError, match=r"quantize_fp8_block: argument 'x' must have 2 dimensions, got shape \[\]"):
        q.quantize_fp8_block(torch.tensor(1.0, device=device))
    with pytest.raises(ValueError, match="argument 'block_m' must be positive, got 0"):
        q.quantize_fp8_block(bf16(4, 4, device=device), block_m=0)
    with pytest.raises(ValueError, match=r"last dimension of 'x' \(100\) must be divisible by 'group_size' \(128\)"):
        q.quantize_fp8_group(bf16(4, 100, device=device))
    with pytest.raises(ValueError, match="argument 'align_rows_to' must be positive"):
        q.quantize_fp8_row(bf16(4, 8, device=device), align_rows_to=0)
    with pytest.raises(ValueError, match="argument 'eps_opt' must be positive"):
        q.quantize_fp8_row(bf16(4, 8, device=device), eps_opt=0.0)


def test_optional_tensors(device):
    a = bf16(2, 3, 64, device=device)
    with pytest.raises(ValueError, match=r"'zero_start_index_M' must hold one count per matrix \(2 for 'a' of shape \[2, 3, 64\]\), got shape \[3\]"):
        q.quantize_fp8_row(a, zero_start_index_M=torch.tensor([1, 2, 3], device=device))
    with pytest.raises(TypeError, match="argument 'zero_start_index_M' must have dtype Int, Long, got Float"):
        q.quantize_fp8_row(a, zero_start_index_M=torch.tensor([1.0, 2.0], device=device))
    with pytest.raises(ValueError, match="needs 'a' with at least 2 dimensions"):
        q.quantize_fp8_row(bf16(64, device=device), zero_start_index_M=torch.tensor([1], device=device))
    with pytest.raises(ValueError, match=r"argument 'scale_ub' must hold one value, got shape \[2\]"):
        q.quantize_fp8_row(a, scale_ub=torch.tensor([1.0, 2.0], device=device))
    with pytest.raises(TypeError, match="argument 'm_sizes' must have dtype Int, Long"):
        q.quantize_fp8_group(bf16(4, 128, device=device), m_sizes=torch.tensor([2.0, 2.0], device=device), k_major=False)


def test_dequant_errors(device):
    xq, s = q.quantize_fp8_row(bf16(4, 64, device=device))
    with pytest.raises(TypeError, match="argument 'xq' must have dtype Float8_e4m3fn, got BFloat16"):
        q.dequantize_fp8_row(bf16(4, 64, device=device), s)
    with pytest.raises(ValueError, match=r"'x_scale' must hold one scale per row of 'xq' \(4 for shape \[4, 64\]\), got shape \[3\]"):
        q.dequantize_fp8_row(xq, s[:3])
    xq, s = q.quantize_fp8_block(bf16(300, 300, device=device))
    with pytest.raises(ValueError, match=r"'x_scale' must have shape \[3, 3\] for 'xq' of shape \[300, 300\] and blocks 128x128, got \[2, 2\]"):
        q.dequantize_fp8_block(xq, s, 128, 128)


@requires_cuda
def test_device_mismatch():
    a = bf16(2, 3, 64, device="cuda")
    with pytest.raises(RuntimeError, match=r"argument 'zero_start_index_M' must be on the same device as 'a' \(cuda:0\), got cpu"):
        q.quantize_fp8_row(a, zero_start_index_M=torch.tensor([1, 2]))
    xq, s = q.quantize_fp8_row(bf16(4, 64, device="cuda"))
    with pytest.raises(RuntimeError, match="'x_scale' must be on the same device as 'xq'"):
        q.dequantize_fp8_row(xq, s.cpu())
    # a CPU scale_ub is moved to the input's device, not rejected
    xq2, _ = q.quantize_fp8_row(bf16(4, 64, device="cuda"), scale_ub=torch.tensor([1.0]))
    assert xq2.is_cuda


@requires_cuda
@pytest.mark.parametrize("fn", [q.quantize_fp8_row, q.quantize_fp8_block, q.quantize_fp8_group])
def test_unknown_schedule(monkeypatch, fn):
    """A misspelt MSLK_FP8_SCHEDULE is a ValueError (it would otherwise time the default kernels);
    every listed name runs."""
    x = bf16(256, 512, device="cuda")
    monkeypatch.setenv("MSLK_FP8_SCHEDULE", "warps")
    with pytest.raises(ValueError, match="MSLK_FP8_SCHEDULE must be auto, oneshot, staged, cluster, bulk, warp, "
                                           "hybrid-persistent or ring \\(or unset\\), got 'warps'"):
        fn(x)
    for name in ("", "auto", "oneshot", "staged", "cluster", "bulk", "warp", "hybrid-persistent", "ring"):
        monkeypatch.setenv("MSLK_FP8_SCHEDULE", name)
        xq, _ = fn(x)
        assert xq.shape == (256, 512)


@requires_cuda
@pytest.mark.parametrize("bad", ["3", "8", "0", "two", "2 "])
def test_unknown_row_team(monkeypatch, bad):
    """MSLK_FP8_ROW_TEAM other than 1, 2 or 4 is a ValueError (it would otherwise time the default team);
    every valid size runs and gives the default's bits."""
    x = bf16(37, 8192, device="cuda")
    ref = q.quantize_fp8_row(x)
    monkeypatch.setenv("MSLK_FP8_ROW_TEAM", bad)
    with pytest.raises(ValueError, match=f"MSLK_FP8_ROW_TEAM must be 1, 2 or 4 \\(or unset\\), got '{bad}'"):
        q.quantize_fp8_row(x)
    for team in ("", "1", "2", "4"):
        monkeypatch.setenv("MSLK_FP8_ROW_TEAM", team)
        xq, scale = q.quantize_fp8_row(x)
        assert torch.equal(xq.view(torch.uint8), ref[0].view(torch.uint8)) and torch.equal(scale, ref[1])
