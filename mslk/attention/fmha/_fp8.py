"""FP8 attention operands: the E4M3 q / k / v of flash3.FwOp (ScaledTensor inputs, as
common.pack_fp8_tensorwise_per_head makes them) and of torch.ops.mslk_flash3.flash_fwd (plain FP8
tensors with descale_q / descale_k / descale_v). Semantics: attention on the operands dequantized
to the output dtype, dtype(float(x) * descale) per (batch or sequence, head), through
torch.ops.mslk.fmha_fp8_dequant; the bf16 / fp16 kernel then runs on those values."""

from __future__ import annotations

import dataclasses
from typing import List, Optional

import torch

from mslk.attention.fmha.common import Inputs, ScaledTensor

E4M3 = torch.float8_e4m3fn
_OUT = (torch.bfloat16, torch.float16)


def is_fp8(x: torch.Tensor) -> bool:
    return x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)


def reasons(d: Inputs) -> List[str]:
    """Why an FP8 problem is not one flash3.FwOp serves ([] when the query is not FP8)."""
    if not is_fp8(d.query):
        return []
    out = []
    for name, x in (("query", d.query), ("key", d.key), ("value", d.value)):
        if x.dtype != E4M3:
            out.append(f"FP8 attention takes float8_e4m3fn {name}; got {x.dtype}")
        elif not isinstance(x, ScaledTensor):
            out.append(f"FP8 {name} must be a ScaledTensor carrying its descale (common.pack_fp8_tensorwise_per_head);"
                       f" got a plain {x.dtype} tensor (a 3-D [B, M, K] input loses its scale when made 4-D: pass "
                       "[B, M, H, K])")
        elif x.original_dtype not in _OUT:
            out.append(f"FP8 {name}: original_dtype must be bfloat16 or float16 (the output dtype); got "
                       f"{x.original_dtype}")
    if not out and not (d.query.original_dtype == d.key.original_dtype == d.value.original_dtype):
        out.append("FP8 query, key and value must share original_dtype; got "
                   f"{d.query.original_dtype}, {d.key.original_dtype}, {d.value.original_dtype}")
    return out


def _operand(x: ScaledTensor, dtype: torch.dtype) -> torch.Tensor:
    data, scale = x.unpack()  # [B, M, (G,) H, K], [B, (G,) H]
    if data.ndim == 5:
        B, M, G, H, K = data.shape
        if H > 1 and data.stride(3) == 0 and scale.stride(-1) == 0:  # K/V expanded over H: one head a group
            y = torch.ops.mslk.fmha_fp8_dequant(data[:, :, :, 0], scale[:, :, 0], dtype)
            return y.unsqueeze(3).expand(B, M, G, H, K)
        y = torch.ops.mslk.fmha_fp8_dequant(data.reshape(B, M, G * H, K), scale.reshape(B, G * H), dtype)
        return y.reshape(B, M, G, H, K)
    if data.ndim == 4 and data.shape[2] > 1 and data.stride(2) == 0 and scale.stride(-1) == 0:
        B, M, H, K = data.shape
        return torch.ops.mslk.fmha_fp8_dequant(data[:, :, :1], scale[:, :1], dtype).expand(B, M, H, K)
    return torch.ops.mslk.fmha_fp8_dequant(data, scale, dtype)


def dequantized(d: Inputs) -> Inputs:
    """d with its FP8 ScaledTensor query, key and value dequantized to their original_dtype."""
    dtype = d.query.original_dtype
    return dataclasses.replace(d, query=_operand(d.query, dtype), key=_operand(d.key, dtype),
                               value=_operand(d.value, dtype))


def raw_operand(api: str, name: str, x: torch.Tensor, descale: Optional[torch.Tensor],
                cu_seqlens: Optional[torch.Tensor], paged: bool = False) -> torch.Tensor:
    """A flash_fwd FP8 operand ([B, M, H, K], varlen [total, H, K], or paged [pages, page_size, H, K])
    dequantized to bfloat16 with its descale ([B or num_seqs, H or Hkv]; None: 1)."""
    if x.dtype != E4M3:
        raise TypeError(f"{api}: FP8 attention takes float8_e4m3fn query, key and value; {name} is {x.dtype}")
    if descale is None:
        descale = torch.ones((), dtype=torch.float32, device=x.device)
    if not isinstance(descale, torch.Tensor) or not descale.is_floating_point():
        raise TypeError(f"{api}: descale_{name[0]} must be a float tensor")
    if paged:
        if descale.ndim == 2 and descale.shape[0] != 1:
            raise NotImplementedError(f"{api}: with paged KV (block_table) descale_{name[0]} must hold one row "
                                      f"(shape [1, H] or [H]); got {tuple(descale.shape)}")
        descale = descale.reshape(1, -1) if descale.ndim == 1 else descale
        return torch.ops.mslk.fmha_fp8_dequant(x, descale, torch.bfloat16)
    if x.ndim == 3:
        return torch.ops.mslk.fmha_fp8_dequant(x.unsqueeze(0), descale, torch.bfloat16, cu_seqlens).squeeze(0)
    return torch.ops.mslk.fmha_fp8_dequant(x, descale, torch.bfloat16)
