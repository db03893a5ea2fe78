"""Independent float64 references for the BF16 grouped GEMMs (plain torch)."""

import torch

BF16 = torch.bfloat16


def rand_bf16(shape, device):
    return torch.randn(shape, dtype=torch.float64).to(BF16).to(device)


def ref_stacked(x, w, sizes):
    """x [T, K] @ w[g].T per group; rows past sum(sizes) are zero. float64."""
    x, w = x.cpu().double(), w.cpu().double()
    out = torch.zeros(x.shape[0], w.shape[1], dtype=torch.float64)
    r = 0
    for g, m in enumerate(sizes):
        out[r:r + m] = x[r:r + m] @ w[g].T
        r += m
    return out


def ref_grad(dy, w, sizes):
    dy, w = dy.cpu().double(), w.cpu().double()
    out = torch.zeros(dy.shape[0], w.shape[2], dtype=torch.float64)
    r = 0
    for g, m in enumerate(sizes):
        out[r:r + m] = dy[r:r + m] @ w[g]
        r += m
    return out


def ref_wgrad(dy, x, sizes):
    dy, x = dy.cpu().double(), x.cpu().double()
    out = torch.zeros(len(sizes), dy.shape[1], x.shape[1], dtype=torch.float64)
    r = 0
    for g, m in enumerate(sizes):
        out[g] = dy[r:r + m].T @ x[r:r + m]
        r += m
    return out


def assert_close(out, ref, red):
    """bf16 result vs float64: float32 sums of `red` exact products, then one bf16 rounding."""
    o = out.cpu().double()
    tol = 2.0 ** -8 * ref.abs() + 1e-5 * red + 1e-5
    bad = (o - ref).abs() > tol
    assert not bad.any(), f"max err {(o - ref).abs().max().item()} at {bad.nonzero()[:4].tolist()}"
