"""Independent references for the rowwise FP8 GEMMs, in plain torch (float64 for the math)."""

import torch

FP8 = torch.float8_e4m3fn


def rand_fp8(shape, device, scale=8.0):
    """Random E4M3 values with a spread of magnitudes (incl. subnormals and zeros)."""
    x = torch.randn(shape, dtype=torch.float64) * scale * torch.exp2(torch.randint(-5, 3, shape, dtype=torch.float64))
    return x.clamp(-448, 448).to(FP8).to(device)


def rand_scale(n, device, lead=()):
    return (torch.rand((*lead, n), dtype=torch.float64) * 0.02 + 1e-3).float().to(device)


def ref(xq, wq, xs, ws, bias=None):
    """float64: xs[..., m] * ws[n] * (xq @ wq.T) + bias[n] (wq [N, K] or batched [B, N, K])."""
    x, w = xq.cpu().double(), wq.cpu().double()
    acc = x @ w.transpose(-1, -2)
    out = acc * xs.cpu().double().reshape(acc.shape[:-1])[..., None] * ws.cpu().double().reshape(
        (*w.shape[:-2], 1, w.shape[-2]) if w.dim() == 3 else (w.shape[0],))
    if bias is not None:
        out = out + bias.cpu().double().reshape(
            (-1, 1, w.shape[-2]) if bias.numel() != w.shape[-2] else (w.shape[-2],))
    return out, (x.abs() @ w.abs().transpose(-1, -2))


def accum_bound(x, w, fast):
    """Bound on |GPU sum - exact sum| of x @ w.T before the scales (float64 x [..., M, K] and
    w [N, K] or [B, N, K], on any device).

    Hopper's FP8 wgmma adds each k32 block of products to its accumulator with about 13 fraction
    bits, truncating (cuBLAS's _scaled_mm computes the same bits): a step loses up to 2^-13 of the
    partial sum S_j it produces. Fast accumulation keeps the whole K in the tensor core, so its
    error is up to 2^-13 * sum_j |S_j|; the bound takes 2^-11 a step (room for the alignment of a
    step's products to its largest exponent) plus 2^-10 * sum |x * w| (steps where one product
    outweighs the partial sum), capped by K/32 * 2^-13 * sum |x * w|, which bounds the same error
    from above. Random partial sums grow like sqrt(j), so this rejects a result 5% off at K = 4096,
    which the sum of magnitudes alone (K/32 * 2^-13 * sum |x * w|, about |S_K| there) accepted.
    The slow path promotes to float32 every 4 steps (k = 128, CUTLASS's promotion interval): one
    128-long block's error plus float32 adds, at any K."""
    K = x.shape[-1]
    wt = w.transpose(-1, -2)
    mag = x.abs() @ wt.abs()
    if not fast:
        return mag * (2.0**-11 + K * 2.0**-24)
    s = torch.zeros_like(mag)
    walk = torch.zeros_like(mag)
    for k0 in range(0, K, 32):
        s += x[..., k0:k0 + 32] @ wt[..., k0:k0 + 32, :]
        walk += s.abs()
    return torch.minimum(mag * max(2.0**-10, K / 32 * 2.0**-13), mag * 2.0**-10 + walk * 2.0**-11)


def check(out, xq, wq, xs, ws, bias=None, fast=True):
    """|out - ref| <= bf16/fp16 rounding of ref + the accumulation error bound of the GPU's sum
    (accum_bound), times xs * ws."""
    expected, _ = ref(xq, wq, xs, ws, bias)
    x, w = xq.cpu().double(), wq.cpu().double()
    xs64 = xs.cpu().double().reshape(expected.shape[:-1])[..., None]
    ws64 = ws.cpu().double().reshape((*wq.shape[:-2], 1, wq.shape[-2]) if wq.dim() == 3 else (wq.shape[0],))
    ulp = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}[out.dtype]
    tiny = 2.0**-25 if out.dtype == torch.float16 else 1e-30  # fp16's subnormal spacing is 2^-24
    bound = expected.abs() * ulp + accum_bound(x, w, fast) * (xs64.abs() * ws64.abs()) + tiny
    err = (out.cpu().double() - expected).abs()
    assert out.shape == expected.shape, (out.shape, expected.shape)
    assert torch.all(err <= bound), f"max err {err.max().item()} (bound there {bound.flatten()[err.argmax()].item()})"


def exact_cpu(xq, wq, xs, ws, out_dtype=torch.bfloat16):
    """The CPU reference's rule, emulated: exact sum -> float32, w_scale*acc in float32,
    x_scale*(that) rounded once to float32, then RNE to the output type (no bias)."""
    acc = (xq.double() @ wq.double().T).float()
    t = (ws.float().reshape(1, -1) * acc)
    v = (xs.double().reshape(-1, 1) * t.double()).float()  # exact product, one rounding
    return v.to(out_dtype)
