"""Triton grouped MXFP8 x MXFP8 GEMM of AMD gfx950; raises in this NVIDIA build (mslk.utils.unavailable)."""

from __future__ import annotations

import torch

from mslk.utils.unavailable import ROCM_GFX950, unavailable


@unavailable(ROCM_GFX950)
def matmul_mx8mx8bf16_grouped(XQ, WQ, x_scale, w_scale, offsets, output=None, actual_num_tokens=None) -> torch.Tensor:
    """Offset-grouped MXFP8 x MXFP8 -> BF16."""
