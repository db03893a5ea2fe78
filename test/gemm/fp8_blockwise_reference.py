"""Independent float64 reference for the block/group-scaled FP8 GEMMs: dequantize each operand
per scale block, multiply in float64."""

import torch

from test.gemm.fp8_gemm_reference import FP8, rand_fp8  # noqa: F401  (re-exported for the tests)


def cdiv(a, b):
    return (a + b - 1) // b


def expand(grid, rows, cols, block_r, block_c):
    """Scale grid [ceil(rows/br), ceil(cols/bc)] -> one scale per element [rows, cols] (float64)."""
    g = grid.cpu().double()
    return g.repeat_interleave(block_r, 0)[:rows].repeat_interleave(block_c, 1)[:, :cols]


def rand_grid(rows, cols, device):
    return (torch.rand((rows, cols), dtype=torch.float64) * 0.02 + 1e-3).float().to(device)


def ref_blockwise(xq, wq, x_grid, w_grid, bm, bn, bk):
    """float64 (xq * x_scale) @ (wq * w_scale).T with K-major grids; also sum |.| for the bound."""
    M, K = xq.shape
    N = wq.shape[0]
    x = xq.cpu().double() * expand(x_grid, M, K, bm, bk)
    w = wq.cpu().double() * expand(w_grid, N, K, bn, bk)
    return x @ w.T, x.abs() @ w.abs().T


def ref_groupwise(xq, wq, x_scale, w_scale):
    """x_scale [K/128, M], w_scale [K/128, N/128] (MN-major)."""
    return ref_blockwise(xq, wq, x_scale.t(), w_scale.t(), 1, 128, 128)


def grouped_x_scale(x_scale, sizes, g):
    """Group g's [K/128, m] scales out of the grouped layout (M-major inside each group's rows)."""
    kb = x_scale.shape[1]
    s = int(sum(sizes[:g]))
    m = int(sizes[g])
    return x_scale.reshape(-1)[s * kb:(s + m) * kb].view(kb, m)


def check(out, expected, mag, device, dtype=torch.bfloat16):
    """|out - ref| <= rounding of ref to `dtype` (+ on CUDA the tensor core's sum inside each 128-K
    block: 4 k32 steps of about 13 fraction bits, bounded by 2^-10 of sum |x * w|; the portable
    kernel's float32 sums are well inside that)."""
    c = 2.0**-10 if torch.device(device).type == "cuda" else 0.0
    ulp = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-23}[dtype]
    tiny = 2.0**-25 if dtype == torch.float16 else 1e-30  # fp16's subnormal spacing is 2^-24
    bound = expected.abs() * ulp + mag * c + tiny
    err = (out.cpu().double() - expected).abs()
    assert out.dtype == dtype and out.shape == expected.shape, (out.dtype, out.shape, expected.shape)
    assert torch.all(err <= bound), f"max err {err.max().item()} (bound there {bound.flatten()[err.argmax()].item()})"


def check_grouped(out, xq, wq, xs, ws, sizes, device):
    """Each group's rows of a grouped groupwise GEMM against ref_groupwise; rows past every group
    are zero."""
    s = 0
    for g, m in enumerate(sizes):
        if m:
            check(out[s:s + m], *ref_groupwise(xq[s:s + m], wq[g], grouped_x_scale(xs, sizes, g), ws[g]), device)
        s += m
    assert torch.all(out[s:] == 0)
