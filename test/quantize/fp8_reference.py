"""Independent references for the FP8 quantizers, in plain torch (float64 for the math)."""

import torch

FP8_MAX = 448.0


def rand(shape, dtype, device, scale=3.0):
    """Random data with a spread of magnitudes (never zeros): exercises subnormals and saturation."""
    x = torch.randn(shape, dtype=torch.float64) * scale
    x = x * torch.exp2(torch.randint(-6, 4, shape, dtype=torch.float64))
    return x.to(dtype).to(device)


def e4m3(v32: torch.Tensor) -> torch.Tensor:
    """sat-RNE E4M3 of a float32 tensor (NaN stays NaN)."""
    return torch.where(torch.isnan(v32), v32, v32.clamp(-FP8_MAX, FP8_MAX)).to(torch.float8_e4m3fn)


def tile_scales(x: torch.Tensor, tile_m: int, tile_k: int, eps: float, ub=None):
    """amax per (tile_m x tile_k) tile of a 2-D tensor -> (scale float32 [gm, gk], inverse float32)."""
    M, K = x.shape
    gm, gk = -(-M // tile_m), -(-K // tile_k)
    a = torch.nan_to_num(x.double().abs().cpu(), nan=0.0)
    pad = torch.zeros(gm * tile_m, gk * tile_k, dtype=torch.float64)
    pad[:M, :K] = a
    amax = pad.view(gm, tile_m, gk, tile_k).amax(dim=(1, 3)).float()
    c = amax.clamp(min=eps)
    if ub is not None:
        c = c.clamp(max=float(ub))
    # (torch computes scalar / tensor as reciprocal * scalar: divide tensor by tensor instead)
    return c / FP8_MAX, torch.full_like(c, FP8_MAX) / c


def quantize_tiles(x: torch.Tensor, tile_m: int, tile_k: int, eps: float, ub=None):
    """Expected (xq, scale[gm, gk]) of the tile contract, computed with the kernels' float32 formula."""
    scale, inv = tile_scales(x, tile_m, tile_k, eps, ub)
    M, K = x.shape
    inv_full = inv.repeat_interleave(tile_m, 0)[:M].repeat_interleave(tile_k, 1)[:, :K]
    return e4m3(x.float().cpu() * inv_full), scale


def check_dequant_error(xq, scale_full, x):
    """float(xq) * scale must be within E4M3's half-ulp of x (relative 2^-4, absolute 2^-10 * scale)."""
    x = x.double().cpu()
    deq = xq.double().cpu() * scale_full.double().cpu()
    s = scale_full.double().cpu()
    bound = torch.maximum(x.abs() * 2.0**-4, s * 2.0**-10) * 1.0001 + 1e-30
    # values above the scale's range saturate to 448 * scale (only when scale_ub clipped)
    bound = torch.where(x.abs() > FP8_MAX * s, x.abs() - FP8_MAX * s + bound, bound)
    err = (deq - x).abs()
    assert torch.all(err <= bound), f"max excess {(err - bound).max().item()}"
