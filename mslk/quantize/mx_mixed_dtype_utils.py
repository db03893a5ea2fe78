"""MXFP6 helpers (spec group "Quantization - MXFP6 helpers").

E2M3: sign bit 5, two exponent bits (bias 1), three mantissa bits, no inf/NaN; the largest
magnitude is 7.5. The decode table is real; the quantizer and packer raise until this build makes
MX kernels (mslk.utils.unavailable).
"""

from __future__ import annotations

import torch

from mslk.utils.unavailable import FP4, unavailable


def _e2m3(code: int) -> float:
    sign = -1.0 if code & 0x20 else 1.0
    exp, man = (code >> 3) & 0x3, code & 0x7
    mag = man / 8.0 if exp == 0 else 2.0 ** (exp - 1) * (1.0 + man / 8.0)
    return sign * mag


E2M3_DECODE: tuple[float, ...] = tuple(_e2m3(c) for c in range(64))
E2M3_MAX = 7.5


@unavailable(FP4)
def quantize_bf16_to_mx6_e2m3(x, block_size=32) -> tuple[torch.Tensor, torch.Tensor]:
    """BF16 to unpacked E2M3 codes (uint8) and E8M0 block scales."""


@unavailable(FP4)
def pack_fp6_e2m3(unpacked: torch.Tensor) -> torch.Tensor:
    """Four E2M3 codes into three bytes, LSB first."""
