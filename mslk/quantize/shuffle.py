"""INT4 weight preprocessing at the spec's module path (mslk.quantize.shuffle).

Group-wise INT4 quantization of a weight x [N, K] along K (groups of `group_size`; a shorter last
group when K is not a multiple), values kept one per int8 element in -8..7, and the packing of two
such values per byte. Scales and zero points come out transposed, [ceil(K / group_size), N]
contiguous float32 (the layout the INT4 GEMMs read: one row per K group). These are plain torch
tensor ops on any device; the INT4 GEMMs consume their output.

Conventions (docs/design/int_gemm.md):
- symmetric: scale = max(amax, 1e-6) / 8, q = clamp(round(x / scale), -8, 7);
- asymmetric: scale = max(max - min, 1e-6) / 15, q = clamp(round((x - min) / scale), 0, 15) - 8,
  zero = min + 8 * scale (a float offset), so that x ~ q * scale + zero;
- round is half to even; pack_int4 puts even k in the low nibble, odd k in the high nibble.
"""

from __future__ import annotations

from typing import Tuple

import torch


Tensor = torch.Tensor


def _check_weight(x: Tensor, group_size: int, name: str) -> None:
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        raise TypeError(f"{name}: argument 'x' must be a floating-point tensor, got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name}: argument 'x' must be 2-D [N, K], got shape {tuple(x.shape)}")
    if not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"{name}: argument 'group_size' must be a positive integer, got {group_size!r}")


def _groups(x: Tensor, group_size: int) -> Tensor:
    """x [N, K] as float32 [N, G, group_size]; a short last group is padded with its own last value
    (the group's min and max stay as they are)."""
    x = x.float()
    K = x.shape[1]
    pad = -K % group_size
    if pad:
        x = torch.cat([x, x[:, -1:].expand(-1, pad)], dim=1)
    return x.view(x.shape[0], -1, group_size)


def _ungroup(q: Tensor, K: int) -> Tensor:
    return q.reshape(q.shape[0], -1)[:, :K].contiguous()


def int4_row_quantize(x: Tensor, group_size: int = 128) -> Tuple[Tensor, Tensor]:
    """Symmetric group-wise INT4 quantization of x [N, K].

    Returns (q [N, K] int8 in -8..7, one value per element; scales [ceil(K/group_size), N] float32)."""
    _check_weight(x, group_size, "int4_row_quantize")
    K = x.shape[1]
    if x.numel() == 0:
        G = -(-K // group_size)
        return torch.empty(x.shape, dtype=torch.int8, device=x.device), x.new_empty((G, x.shape[0]),
                                                                                      dtype=torch.float32)
    g = _groups(x, group_size)
    scale = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-6) / 8
    q = torch.round(g / scale).clamp_(-8, 7).to(torch.int8)
    return _ungroup(q, K), scale.squeeze(-1).t().contiguous()


def int4_row_quantize_zp(x: Tensor, group_size: int = 128) -> Tuple[Tensor, Tensor, Tensor]:
    """Asymmetric group-wise INT4 quantization of x [N, K] with a float zero point per group.

    Returns (q [N, K] int8 in -8..7, unpacked; scales and zeros [ceil(K/group_size), N] float32),
    with x ~ q * scale + zero."""
    _check_weight(x, group_size, "int4_row_quantize_zp")
    K = x.shape[1]
    if x.numel() == 0:
        G = -(-K // group_size)
        e = x.new_empty((G, x.shape[0]), dtype=torch.float32)
        return torch.empty(x.shape, dtype=torch.int8, device=x.device), e, e.clone()
    g = _groups(x, group_size)
    lo, hi = g.amin(dim=-1, keepdim=True), g.amax(dim=-1, keepdim=True)
    scale = (hi - lo).clamp(min=1e-6) / 15
    zero = lo + 8 * scale
    q = (torch.round((g - lo) / scale).clamp_(0, 15) - 8).to(torch.int8)
    return _ungroup(q, K), scale.squeeze(-1).t().contiguous(), zero.squeeze(-1).t().contiguous()


def pack_int4(x: Tensor) -> Tensor:
    """Packs int8 values in -8..7 two per byte along the last dimension: [..., K] -> [..., K/2] int8,
    x[..., 2i] in the low nibble and x[..., 2i+1] in the high nibble."""
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.int8, torch.uint8, torch.int16, torch.int32,
                                                           torch.int64):
        raise TypeError(f"pack_int4: argument 'x' must be an integer tensor (int8 values in -8..7), got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.dim() == 0 or x.shape[-1] % 2:
        raise ValueError(f"pack_int4: argument 'x' must have an even last dimension (two values per byte), "
                         f"got shape {tuple(x.shape)}")
    lo = x[..., 0::2].to(torch.int16) & 0xF
    hi = (x[..., 1::2].to(torch.int16) & 0xF) << 4
    return (lo | hi).to(torch.uint8).view(torch.int8).contiguous()


def quantize_int4_preshuffle(w: Tensor, group_size: int = 128, dtype: str = "fp8",
                             use_zp: bool = True) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    """Quantizes w [N, K] to INT4 for the preshuffled GEMMs (docs/design/int4_gemm.md).

    dtype "fp8": w -> FP8 rows (quantize_fp8_row: row_scale [N] float32), then symmetric INT4 groups
    of the FP8 values with float8_e4m3fn group scales (q rounded against the stored scale); returns
    (preshuffled wq [N, K/2], (group_scale [K/group, 8, N], row_scale)) for f8i4bf16_shuffled.
    dtype "bf16": int4_row_quantize_zp (or, use_zp=False, int4_row_quantize with zero 0); returns
    (preshuffled wq, (group_scale, group_zero)) as bf16 [K/group, N] for bf16i4bf16_shuffled.
    A w with leading batch dimensions [..., N, K] is quantized one [N, K] matrix at a time and every
    output gains the same leading dimensions (for the batched and grouped shuffled GEMMs)."""
    if isinstance(w, torch.Tensor) and w.dim() >= 3:
        if dtype not in ("fp8", "bf16"):
            raise ValueError(f"quantize_int4_preshuffle: argument 'dtype' must be 'fp8' or 'bf16', got {dtype!r}")
        lead = w.shape[:-2]
        parts = [quantize_int4_preshuffle(m, group_size, dtype, use_zp) for m in w.reshape(-1, *w.shape[-2:])]
        if not parts:
            raise ValueError(f"quantize_int4_preshuffle: argument 'w' has no [N, K] matrix, got shape {tuple(w.shape)}")

        def stack(ts):
            return torch.stack(ts).view(*lead, *ts[0].shape)

        return stack([p[0] for p in parts]), (stack([p[1][0] for p in parts]), stack([p[1][1] for p in parts]))
    _check_weight(w, group_size, "quantize_int4_preshuffle")
    if dtype not in ("fp8", "bf16"):
        raise ValueError(f"quantize_int4_preshuffle: argument 'dtype' must be 'fp8' or 'bf16', got {dtype!r}")
    if dtype == "bf16":
        if use_zp:
            q, scale, zero = int4_row_quantize_zp(w, group_size)
        else:
            q, scale = int4_row_quantize(w, group_size)
            zero = torch.zeros_like(scale)
        wq, _ = torch.ops.mslk.preshuffle_i4(pack_int4(q), scale.bfloat16())
        return wq, (scale.bfloat16(), zero.bfloat16())
    from mslk.quantize.triton.fp8_quantize import quantize_fp8_row

    xq, row_scale = quantize_fp8_row(w)
    _, scale = int4_row_quantize(xq.float(), group_size)
    scale8 = scale.to(torch.float8_e4m3fn)
    g = _groups(xq, group_size)
    div = scale8.float().t().unsqueeze(-1)
    div = torch.where(div == 0, torch.ones_like(div), div)  # a scale flushed to 0: the group is ~0, q = 0
    q = torch.round(g / div).clamp_(-8, 7).to(torch.int8)
    wq, group_scale = torch.ops.mslk.preshuffle_i4(pack_int4(_ungroup(q, w.shape[1])), scale8)
    return wq, (group_scale, row_scale)


def ck_preshuffle(src: Tensor, NXdl: int = 16) -> Tensor:
    """The weight layout that f8f8bf16_rowwise_preshuffle / f8f8f16_rowwise_preshuffle read.

    On ROCm this is Composable Kernel's XDL tiling of a float8_e4m3fnuz weight. Here the
    preshuffled layout is the row-major [N, K] one, so this returns a contiguous copy of `src`
    (float8_e4m3fn, the FP8 format of NVIDIA GPUs and of this build's CPU reference): the Hopper
    kernels load the weight with TMA, which applies the shared-memory swizzle in hardware, so they
    read the row-major weight as it is. `NXdl` (CK's tile width) must be a positive integer and
    does not change the layout.
    """
    name = "mslk.quantize.shuffle.ck_preshuffle"
    if not isinstance(src, torch.Tensor) or src.dim() != 2:
        raise ValueError(f"{name}: argument 'src' must be a 2-D [N, K] weight tensor, got "
                         f"{tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__}")
    if src.dtype == torch.float8_e4m3fnuz:
        raise TypeError(f"{name}: argument 'src' is float8_e4m3fnuz, the ROCm FP8 format; on this platform "
                        "quantize the weight to torch.float8_e4m3fn (e.g. quantize_fp8_row)")
    if src.dtype != torch.float8_e4m3fn:
        raise TypeError(f"{name}: argument 'src' must be torch.float8_e4m3fn, got {src.dtype}")
    if isinstance(NXdl, bool) or not isinstance(NXdl, int) or NXdl < 1:
        raise ValueError(f"{name}: argument 'NXdl' must be a positive integer, got {NXdl!r}")
    return src.clone(memory_format=torch.contiguous_format)
