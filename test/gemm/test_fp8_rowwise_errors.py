"""Bad arguments fail with messages that name the op and the argument."""

import pytest
import torch

from test.gemm.fp8_gemm_reference import rand_fp8, rand_scale

ops = torch.ops.mslk


def args(device, M=4, N=8, K=16):
    return rand_fp8((M, K), device), rand_fp8((N, K), device), rand_scale(M, device), rand_scale(N, device)


def test_rowwise_errors(device):
    xq, wq, xs, ws = args(device)
    with pytest.raises(TypeError, match="f8f8bf16_rowwise: argument 'WQ' must have dtype Float8_e4m3fn"):
        ops.f8f8bf16_rowwise(xq, wq.float(), xs, ws)
    with pytest.raises(ValueError, match="must have the same K"):
        ops.f8f8bf16_rowwise(xq, rand_fp8((8, 32), device), xs, ws)
    with pytest.raises(ValueError, match="argument 'x_scale' must hold 4 values"):
        ops.f8f8bf16_rowwise(xq, wq, rand_scale(5, device), ws)
    with pytest.raises(TypeError, match="argument 'w_scale' must have dtype Float"):
        ops.f8f8bf16_rowwise(xq, wq, xs, ws.to(torch.bfloat16))
    with pytest.raises(ValueError, match="argument 'bias' must hold 8 values"):
        ops.f8f8bf16_rowwise(xq, wq, xs, ws, torch.zeros(7, device=device))
    with pytest.raises(TypeError, match="argument 'bias' must have dtype"):
        ops.f8f8bf16_rowwise(xq, wq, xs, ws, torch.zeros(8, dtype=torch.float16, device=device))
    with pytest.raises(ValueError, match="argument 'XQ' must have stride 1 in its last dimension"):
        ops.f8f8bf16_rowwise(rand_fp8((16, 4), device).t(), wq, xs, ws)
    with pytest.raises(ValueError, match="argument 'WQ' must have 2 dimensions"):
        ops.f8f8bf16_rowwise(xq, wq[None], xs, ws)
    with pytest.raises(TypeError, match="f8f8bf16_rowwise_out: argument 'output' must have dtype BFloat16"):
        ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, torch.empty(4, 8, device=device))
    with pytest.raises(ValueError, match="argument 'output' must have shape"):
        ops.f8f8bf16_rowwise_out(xq, wq, xs, ws, torch.empty(4, 9, dtype=torch.bfloat16, device=device))
    with pytest.raises(ValueError, match="'WQ' must be \\[B, N, K\\]"):
        ops.f8f8bf16_rowwise_batched(xq[None].expand(2, 4, 16), wq[None].expand(3, 8, 16), xs, ws)


def test_grouped_errors(device):
    xq, wq, xs, ws = args(device)
    with pytest.raises(ValueError, match="one tensor per group, got 2, 1, 2 and 2"):
        ops.f8f8bf16_rowwise_grouped([xq, xq], [wq], [xs, xs], [ws, ws])
    with pytest.raises(ValueError, match="same N to concatenate"):
        ops.f8f8bf16_rowwise_grouped_cat([xq, xq], [wq, wq[:4]], [xs, xs], [ws, ws[:4]])
    # empty lists carry no device: the dispatcher itself refuses them (no backend to pick)
    with pytest.raises((ValueError, NotImplementedError)):
        ops.f8f8bf16_rowwise_grouped_cat([], [], [], [])
    W3 = rand_fp8((2, 8, 16), device)
    ws3 = rand_scale(16, device)
    with pytest.raises(ValueError, match="'M_sizes' must hold one size per group \\(2\\)"):
        ops.f8f8bf16_rowwise_grouped_stacked(xq, W3, xs, ws3, torch.tensor([4], device=device))
    # Sizes the host can read are checked; on CUDA they stay on the device (no sync): a negative
    # size counts as 0 and rows past XQ's are dropped (README), as the CPU computes for the fixed sizes.
    for bad, fixed, msg in (([2, 3], [2, 2], "sums to 5, more than the 4 rows"), ([-1, 3], [0, 3], "must be non-negative")):
        if device == "cpu":
            with pytest.raises(ValueError, match=msg):
                ops.f8f8bf16_rowwise_grouped_stacked(xq, W3, xs, ws3, torch.tensor(bad))
        else:
            got = ops.f8f8bf16_rowwise_grouped_stacked(xq, W3, xs, ws3, torch.tensor(bad, device=device))
            want = ops.f8f8bf16_rowwise_grouped_stacked(xq.cpu(), W3.cpu(), xs.cpu(), ws3.cpu(), torch.tensor(fixed))
            torch.testing.assert_close(got.cpu().float(), want.float(), rtol=2e-2, atol=1e-2)
    with pytest.raises(TypeError, match="'M_sizes' must have dtype"):
        ops.f8f8bf16_rowwise_grouped_stacked(xq, W3, xs, ws3, torch.tensor([1.0, 3.0], device=device))
    with pytest.raises(ValueError, match="'zero_start_index_M' must hold one count per group"):
        ops.f8f8bf16_rowwise_grouped_dynamic(xq[None].expand(2, 4, 16), W3, rand_scale(8, device), ws3,
                                             torch.tensor([1], device=device))
    X3 = rand_fp8((2, 4, 16), device)
    with pytest.raises(ValueError, match="'offsets' must be omitted for 3D x 3D"):
        ops.f8f8bf16_rowwise_grouped_mm(X3, W3, rand_scale(8, device), ws3, torch.tensor([1, 2], device=device))
    with pytest.raises(ValueError, match="'offsets' is required"):
        ops.f8f8bf16_rowwise_grouped_mm(xq, W3, xs, ws3)
    bad = torch.tensor([3, 1], dtype=torch.int32)
    if device == "cpu":
        with pytest.raises(ValueError, match="non-decreasing"):
            ops.f8f8bf16_rowwise_grouped_mm(xq, W3, xs, ws3, bad)
    else:  # device-side offsets (no sync): a group ending before the previous one is empty
        got = ops.f8f8bf16_rowwise_grouped_mm(xq, W3, xs, ws3, bad.to(device))
        want = ops.f8f8bf16_rowwise_grouped_mm(xq.cpu(), W3.cpu(), xs.cpu(), ws3.cpu(),
                                               torch.tensor([3, 3], dtype=torch.int32))
        torch.testing.assert_close(got.cpu().float(), want.float(), rtol=2e-2, atol=1e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_mismatch():
    xq, wq, xs, ws = args("cuda")
    with pytest.raises(RuntimeError, match="argument 'x_scale' must be on the same device as 'XQ'"):
        ops.f8f8bf16_rowwise(xq, wq, xs.cpu(), ws)
    with pytest.raises(RuntimeError, match="argument 'WQ' must be on the same device as 'XQ'"):
        ops.f8f8bf16_rowwise(xq, wq.cpu(), xs, ws)
