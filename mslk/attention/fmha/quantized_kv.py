"""Quantized K/V caches for split-K decode (triton_splitk.FwOp): the makers and exact torch
dequantizers of the two int32 layouts (docs/design/attention_decode.md, "Quantized K/V caches").

INT4, `num_groups` G in {1, 2, 4, 8}: int32 rows of D // 8 + G words. Word g < G holds group g's
fp16 scale (low 16 bits) and fp16 shift (high 16 bits); the D // 8 words after them hold the
unsigned nibbles, element i in nibble i (byte i // 2, low nibble for even i), in group
i // (D // G). Dequantized value: q * scale + shift.

FP8 rowwise: int32 rows of D // 4 words, element i the E4M3 (fn) byte i, and one scale/shift per
row in a separate tensor of the rows' shape: int32 packing fp16 (scale, shift) as above
(value = x * scale + shift), or float32 scale with `use_fp32_scales` (value = x * scale).
"""

from typing import Tuple

import torch

INT4_GROUPS = (1, 2, 4, 8)
_E4M3_MAX = 448.0


def _check_float(x: torch.Tensor, name: str, fn: str, multiple: int) -> None:
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        raise TypeError(f"{fn}: argument '{name}' must be a floating tensor; got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.ndim < 1 or x.shape[-1] % multiple != 0 or x.shape[-1] == 0:
        raise ValueError(f"{fn}: argument '{name}' must have a last dim that is a positive multiple of "
                         f"{multiple}; got shape {tuple(x.shape)}")


def _check_groups(num_groups: int, fn: str) -> None:
    if num_groups not in INT4_GROUPS:
        raise ValueError(f"{fn}: argument 'num_groups' must be one of {INT4_GROUPS}; got {num_groups}")


def _half_pair_to_int32(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """fp16 tensors [...] -> int32 [...] with lo's bits in the low half and hi's in the high half."""
    return torch.stack([lo.view(torch.int16), hi.view(torch.int16)], dim=-1).contiguous().view(torch.int32)[..., 0]


def _int32_to_half_pair(w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """int32 [...] -> (low fp16, high fp16) as float32 tensors [...]."""
    h = w.contiguous().unsqueeze(-1).view(torch.int16).view(torch.float16).float()
    return h[..., 0], h[..., 1]


def int4_num_groups(head_dim: int, packed_last_dim: int) -> int:
    """The group count G of an INT4 cache whose rows hold `packed_last_dim` = head_dim // 8 + G words."""
    return packed_last_dim - head_dim // 8


def quantize_kv_int4(k: torch.Tensor, num_groups: int = 1) -> torch.Tensor:
    """k [..., D] (D a multiple of 8 and of num_groups) -> int32 [..., D // 8 + num_groups]: per group
    of D // num_groups elements, scale = (max - min) / 15 and shift = min (both fp16), q = round((x -
    shift) / scale) in 0..15. The error of one element is at most about scale / 2."""
    fn = "quantize_kv_int4"
    _check_groups(num_groups, fn)
    _check_float(k, "k", fn, 8)
    D = k.shape[-1]
    if D % num_groups != 0:
        raise ValueError(f"{fn}: head dim {D} is not a multiple of num_groups {num_groups}")
    lead = k.shape[:-1]
    x = k.float().reshape(*lead, num_groups, D // num_groups)
    lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
    scale, shift = ((hi - lo) / 15).half(), lo.half()
    s, sh = scale.float(), shift.float()
    q = torch.where(s > 0, (x - sh) / torch.where(s > 0, s, 1.0), 0.0).round().clamp(0, 15).to(torch.uint8)
    q = q.reshape(*lead, D)
    data = (q[..., 0::2] | (q[..., 1::2] << 4)).contiguous().view(torch.int32)  # [..., D // 8]
    ss = _half_pair_to_int32(scale[..., 0], shift[..., 0])  # [..., G]
    return torch.cat([ss, data], dim=-1).contiguous()


def dequantize_kv_int4(kq: torch.Tensor, num_groups: int = 1, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """int32 [..., D // 8 + num_groups] -> [..., D] in `dtype` (computed in float32), in torch."""
    fn = "dequantize_kv_int4"
    _check_groups(num_groups, fn)
    if kq.dtype != torch.int32 or kq.shape[-1] <= num_groups:
        raise ValueError(f"{fn}: argument 'kq' must be int32 with last dim D // 8 + num_groups; got "
                         f"{kq.dtype} {tuple(kq.shape)}")
    lead, G = kq.shape[:-1], num_groups
    D = 8 * (kq.shape[-1] - G)
    scale, shift = _int32_to_half_pair(kq[..., :G])
    b = kq[..., G:].contiguous().view(torch.uint8)  # [..., D // 2]
    q = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(*lead, G, D // G).float()
    return (q * scale[..., None] + shift[..., None]).reshape(*lead, D).to(dtype)


def quantize_kv_fp8(k: torch.Tensor, use_fp32_scales: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """k [..., D] (D a multiple of 4) -> (int32 [..., D // 4] of E4M3 bytes, scale_shift [...]).
    fp16 scales (default): shift = the row's mid-range, scale = half range / 448, both fp16, packed as
    one int32 per row. use_fp32_scales: symmetric, scale = amax / 448 as float32, no shift."""
    fn = "quantize_kv_fp8"
    _check_float(k, "k", fn, 4)
    x = k.float()
    if use_fp32_scales:
        amax = x.abs().amax(-1, keepdim=True)
        scale = torch.where(amax > 0, amax / _E4M3_MAX, 1.0)
        y, ss = x / scale, scale[..., 0].contiguous()
    else:
        lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
        shift = ((hi + lo) / 2).half()
        sh = shift.float()
        scale = (torch.maximum(hi - sh, sh - lo) / _E4M3_MAX).half()
        scale = torch.where(scale.float() > 0, scale, torch.ones_like(scale))
        y, ss = (x - sh) / scale.float(), _half_pair_to_int32(scale[..., 0], shift[..., 0])
    data = y.clamp(-_E4M3_MAX, _E4M3_MAX).to(torch.float8_e4m3fn).contiguous().view(torch.uint8)
    return data.view(torch.int32), ss


def dequantize_kv_fp8(kq: torch.Tensor, scale_shift: torch.Tensor, dtype: torch.dtype = torch.float32
                      ) -> torch.Tensor:
    """int32 [..., D // 4] of E4M3 bytes and scale_shift [...] (int32 fp16 pairs, or float32 scales)
    -> [..., D] in `dtype` (computed in float32), in torch."""
    if kq.dtype != torch.int32:
        raise ValueError(f"dequantize_kv_fp8: argument 'kq' must be int32; got {kq.dtype}")
    x = kq.contiguous().view(torch.uint8).view(torch.float8_e4m3fn).float()
    if scale_shift.dtype == torch.float32:
        return (x * scale_shift.reshape(*kq.shape[:-1], 1)).to(dtype)
    scale, shift = _int32_to_half_pair(scale_shift.reshape(kq.shape[:-1]))
    return (x * scale[..., None] + shift[..., None]).to(dtype)
