"""MXFP4 quantization kernel frontend; raises in this build (mslk.utils.unavailable)."""

from __future__ import annotations

import torch

from mslk.quantize.triton.fp4_quantize import RoundingMode
from mslk.utils.unavailable import FP4, unavailable


@unavailable(FP4)
def quantize_mx4(x, group_size=32, rounding_mode=RoundingMode.ceil, *, seed=None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed E2M1 and E8M0 scales (a 1D input keeps an extra row dimension)."""
