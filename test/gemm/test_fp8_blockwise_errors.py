"""Bad arguments of the block/group-scaled FP8 GEMMs fail with messages that name the op and the
argument; a scale grid in the transposed layout says which quantizer call writes the right one."""

import pytest
import torch

from mslk.gemm.triton.fp8_gemm import matmul_fp8_block
from mslk.gemm.triton.fp8_groupwise_gemm import matmul_f8f8bf16_groupwise
from test.gemm.fp8_blockwise_reference import rand_fp8, rand_grid

ops = torch.ops.mslk


def gw(device, M=5, N=256, K=384):
    return (rand_fp8((M, K), device), rand_fp8((N, K), device), rand_grid(K // 128, M, device),
            rand_grid(K // 128, N // 128, device))


def test_groupwise_errors(device):
    xq, wq, xs, ws = gw(device)
    with pytest.raises(TypeError, match="f8f8bf16_groupwise: argument 'x_scale' must have dtype Float"):
        ops.f8f8bf16_groupwise(xq, wq, xs.to(torch.bfloat16), ws)
    with pytest.raises(TypeError, match="argument 'w_scale' must have dtype Float"):
        ops.f8f8bf16_groupwise(xq, wq, xs, ws.double())
    with pytest.raises(ValueError, match=r"argument 'x_scale' must have shape \[3, 5\].*transposed layout.*"
                                         r"k_major=False"):
        ops.f8f8bf16_groupwise(xq, wq, xs.t().contiguous(), ws)
    with pytest.raises(ValueError, match=r"argument 'w_scale' must have shape \[3, 2\].*transposed layout"):
        ops.f8f8bf16_groupwise(xq, wq, xs, ws.t().contiguous())
    with pytest.raises(ValueError, match=r"argument 'w_scale' must have shape \[3, 2\]"):
        ops.f8f8bf16_groupwise(xq, wq, xs, rand_grid(3, 256, device))  # one scale per weight row
    with pytest.raises(TypeError, match="argument 'XQ' must have dtype Float8_e4m3fn"):
        ops.f8f8bf16_groupwise(xq.float(), wq, xs, ws)
    with pytest.raises(ValueError, match="must have the same K"):
        ops.f8f8bf16_groupwise(xq, rand_fp8((256, 256), device), xs, ws)
    with pytest.raises(ValueError, match="argument 'WQ' must have stride 1 in its last dimension"):
        ops.f8f8bf16_groupwise(xq, rand_fp8((384, 256), device).t(), xs, ws)
    with pytest.raises(ValueError, match="argument 'XQ' must have 2 dimensions"):
        ops.f8f8bf16_groupwise(xq[None], wq, xs, ws)
    with pytest.raises(ValueError, match="argument 'output' must be a"):
        matmul_f8f8bf16_groupwise(xq, wq, xs, ws, output=torch.empty(5, 255, dtype=torch.bfloat16, device=device))


def test_blockwise_errors(device):
    M, N, K = 130, 256, 256
    xq, wq = rand_fp8((M, K), device), rand_fp8((N, K), device)
    xs, ws = rand_grid(2, 2, device), rand_grid(2, 2, device)
    with pytest.raises(ValueError, match=r"f8f8bf16_blockwise: argument 'x_scale' must have shape \[2, 2\] \(one "
                                         r"scale per block of 128 rows x 128 K of 'XQ'\), got \[1, 2\]"):
        ops.f8f8bf16_blockwise(xq, wq, xs[:1], ws)
    with pytest.raises(ValueError, match=r"argument 'w_scale' must have shape \[1, 1\]"):
        ops.f8f8bf16_blockwise(xq, wq, xs[:, :1].contiguous(), ws, 128, 256, 256)  # block sizes disagree
    with pytest.raises(ValueError, match="argument 'block_k' must be positive"):
        ops.f8f8bf16_blockwise(xq, wq, xs, ws, 128, 128, 0)
    with pytest.raises(TypeError, match="argument 'x_scale' must have dtype Float"):
        ops.f8f8bf16_blockwise(xq, wq, xs.half(), ws)
    with pytest.raises(ValueError, match=r"matmul_fp8_block: argument 'a_scale' must have shape \[1, 1\]"):
        matmul_fp8_block(xq, wq, xs, ws)  # the 256 default blocks
    with pytest.raises(ValueError, match="argument 'dot_out_dtype'"):
        matmul_fp8_block(xq, wq, xs, ws, 128, 128, 128, torch.int32)


def test_groupwise_grouped_errors(device):
    G, N, K = 3, 256, 256
    xq, wq = rand_fp8((10, K), device), rand_fp8((G, N, K), device)
    xs, ws = rand_grid(10, 2, device), rand_grid(G * 2, 2, device).view(G, 2, 2)
    ms = torch.tensor([2, 3, 4], device=device)
    op = ops.f8f8bf16_groupwise_grouped
    with pytest.raises(ValueError, match=r"argument 'x_scale' must have shape \[10, 2\]"):
        op(xq, wq, xs.t().contiguous(), ws, ms)
    with pytest.raises(ValueError, match="argument 'x_scale' must be contiguous"):
        op(xq, wq, rand_grid(2, 10, device).t(), ws, ms)
    with pytest.raises(ValueError, match=r"argument 'w_scale' must have shape \[3, 2, 2\]"):
        op(xq, wq, xs, ws[:2], ms)
    with pytest.raises(ValueError, match=r"argument 'M_sizes' must hold one size per group \(3\)"):
        op(xq, wq, xs, ws, ms[:2])
    with pytest.raises(TypeError, match="argument 'M_sizes' must have dtype"):
        op(xq, wq, xs, ws, ms.float())
    # Sizes the host reads are checked; on CUDA they stay on the device (no sync): a negative size
    # counts as 0 and rows past XQ's are dropped (README), as the CPU computes for the fixed sizes.
    for bad, fixed, msg in (([3, 4, 5], [3, 4, 3], "'M_sizes' sums to 12, more than the 10 rows"),
                            ([2, -1, 4], [2, 0, 4], "'M_sizes' must be non-negative")):
        if device == "cpu":
            with pytest.raises(ValueError, match=msg):
                op(xq, wq, xs, ws, torch.tensor(bad))
        else:
            got = op(xq, wq, xs, ws, torch.tensor(bad, device=device))
            want = op(xq.cpu(), wq.cpu(), xs.cpu(), ws.cpu(), torch.tensor(fixed))
            torch.testing.assert_close(got.cpu().float(), want.float(), rtol=2e-2, atol=1e-2)
    with pytest.raises(ValueError, match="argument 'WQ' must have 3 dimensions"):
        op(xq, wq[0], xs, ws, ms)
