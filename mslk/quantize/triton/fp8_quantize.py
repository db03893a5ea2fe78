"""FP8 quantizers at the spec's module path (mslk.quantize.triton.fp8_quantize).

The reference wrote these in Triton; here every one is a thin call into mslk's native op
(CUDA C++ kernel on GPU tensors, exact CPU reference on CPU tensors). Scales are reciprocal
(dequantization multipliers): x ~= float(xq) * scale.

Differences from the reference, all in the caller's favour: `use_triton=False` (the reference's
PyTorch fallback) runs the same native op, so `zero_start_index_M`, `align_rows_to` and `eps_opt`
are honoured on every path, values saturate to +-448 instead of overflowing to NaN, and
non-contiguous inputs whose last dim has stride 1 are accepted.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from mslk import _native

_native.load()

Tensor = torch.Tensor


def triton_quantize_fp8_row(a: Tensor, scale_ub: Optional[Tensor] = None,
                            zero_start_index_M: Optional[Tensor] = None, align_rows_to: Optional[int] = None,
                            eps_opt: float = 1 / 512) -> Tuple[Tensor, Tensor]:
    """Rowwise FP8 E4M3: one reciprocal scale per row (shape a.shape[:-1])."""
    return torch.ops.triton.quantize_fp8_row(a, scale_ub, zero_start_index_M, True, None, align_rows_to, eps_opt)


def quantize_fp8_row(a: Tensor, scale_ub: Optional[Tensor] = None, zero_start_index_M: Optional[Tensor] = None,
                     use_triton: bool = True, output_device: Optional[torch.device] = None,
                     align_rows_to: Optional[int] = None, eps_opt: float = 1 / 512) -> Tuple[Tensor, Tensor]:
    """Rowwise FP8 E4M3 with the reference's public arguments; outputs land on output_device."""
    return torch.ops.triton.quantize_fp8_row(a, scale_ub, zero_start_index_M, use_triton, output_device,
                                             align_rows_to, eps_opt)


def scale_fp8_row(a: Tensor, x_scale: Tensor, w_scale: Tensor) -> Tensor:
    """Apply activation (per row of a) and weight (per column of a) scales to an accumulator."""
    if a.dim() != 2:
        raise ValueError(f"scale_fp8_row: argument 'a' must have 2 dimensions [M, N], got shape {tuple(a.shape)}")
    for name, s, n in (("x_scale", x_scale, a.shape[0]), ("w_scale", w_scale, a.shape[1])):
        if s.dim() != 1 or s.shape[0] != n:
            raise ValueError(f"scale_fp8_row: argument '{name}' must have shape [{n}], got {tuple(s.shape)}")
    return a * x_scale[:, None] * w_scale[None, :]


def _as_rows(x: Tensor) -> Tensor:
    return x if x.dim() in (0, 2) else x.reshape(-1, x.shape[-1])


def triton_quantize_fp8_block(x: Tensor, block_m: int = 256, block_k: int = 256, scale_ub: Optional[Tensor] = None,
                              k_major: bool = True) -> Tuple[Tensor, Tensor]:
    """Blockwise FP8: one scale per block_m x block_k tile, [cdiv(M,bm), cdiv(K,bk)] ([gk, gm] if not k_major).
    Leading dimensions of an N-D x are flattened into M."""
    xq, scale = torch.ops.triton.quantize_fp8_block(_as_rows(x), block_m, block_k, scale_ub, True, None, k_major)
    return xq.view(x.shape), scale


def quantize_fp8_block(x: Tensor, block_m: int = 256, block_k: int = 256, scale_ub: Optional[Tensor] = None,
                       use_triton: bool = True, output_device: Optional[torch.device] = None,
                       k_major: bool = True) -> Tuple[Tensor, Tensor]:
    xq, scale = torch.ops.triton.quantize_fp8_block(_as_rows(x), block_m, block_k, scale_ub, use_triton,
                                                    output_device, k_major)
    return xq.view(x.shape), scale


def _quantize_fp8_group(x: Tensor, group_size: int, scale_ub: Optional[Tensor], m_sizes: Optional[Tensor],
                        k_major: bool) -> Tuple[Tensor, Tensor]:
    if k_major:
        # With m_sizes the scales are M-major inside each row segment whatever k_major says.
        return torch.ops.mslk.quantize_fp8_group(x, group_size, scale_ub, m_sizes, m_sizes is None)
    xq, scale = torch.ops.mslk.quantize_fp8_group(_as_rows(x), group_size, scale_ub, m_sizes, False)
    return xq.view(x.shape), scale


def triton_quantize_fp8_group(x: Tensor, group_size: int = 128, scale_ub: Optional[Tensor] = None,
                              m_sizes: Optional[Tensor] = None, k_major: bool = True) -> Tuple[Tensor, Tensor]:
    """Groups of group_size along K: scales [..., K/g] (k_major) or [K/g, M] (leading dimensions of x
    flattened into M); with m_sizes, x is [total_M, K], the scales are [total_M, K/g] and each group's
    scales are stored M-major inside its row segment."""
    return _quantize_fp8_group(x, group_size, scale_ub, m_sizes, k_major)


def quantize_fp8_group(x: Tensor, group_size: int = 128, scale_ub: Optional[Tensor] = None,
                       m_sizes: Optional[Tensor] = None, k_major: bool = True, use_triton: bool = True,
                       output_device: Optional[torch.device] = None) -> Tuple[Tensor, Tensor]:
    xq, scale = _quantize_fp8_group(x, group_size, scale_ub, m_sizes, k_major)
    if output_device is not None:
        xq, scale = xq.to(output_device), scale.to(output_device)
    return xq, scale


def _quantize_fp8_tensor(a: Tensor, use_triton: bool) -> Tuple[Tensor, Tensor]:
    if a.dim() == 0 or a.stride(-1) == 1:
        return torch.ops.triton.quantize_fp8_tensor(a, use_triton)
    # One scale for the whole tensor: quantize a dense copy, return it in a's memory format.
    xq, scale = torch.ops.triton.quantize_fp8_tensor(a.contiguous(), use_triton)
    return torch.empty_like(a, dtype=xq.dtype).copy_(xq), scale


def triton_quantize_fp8_tensor(a: Tensor) -> Tuple[Tensor, Tensor]:
    """Tensorwise FP8: one scalar (0-dim) reciprocal scale. Any layout; the FP8 output keeps a's
    memory format (e.g. channels_last_3d)."""
    return _quantize_fp8_tensor(a, True)


def quantize_fp8_tensor(a: Tensor, use_triton: bool = True) -> Tuple[Tensor, Tensor]:
    return _quantize_fp8_tensor(a, use_triton)


def dequantize_fp8_row(xq: Tensor, x_scale: Tensor) -> Tensor:
    """BF16 float(xq) * x_scale[..., None]."""
    return torch.ops.mslk.dequantize_fp8_row(xq, x_scale)


def dequantize_fp8_block(xq: Tensor, x_scale: Tensor, block_m: int = 256, block_k: int = 256) -> Tensor:
    """BF16 float(xq) * x_scale[m // block_m, k // block_k]."""
    return torch.ops.mslk.dequantize_fp8_block(xq, x_scale, block_m, block_k)
