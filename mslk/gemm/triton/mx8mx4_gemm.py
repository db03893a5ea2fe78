"""Triton MXFP8 x MXFP4 GEMMs of AMD gfx950; raise in this NVIDIA build (mslk.utils.unavailable)."""

from __future__ import annotations

import torch

from mslk.utils.unavailable import ROCM_GFX950, unavailable


@unavailable(ROCM_GFX950)
def matmul_mx8mx4bf16(XQ, WQ, x_scale, w_scale, output=None) -> torch.Tensor:
    """MXFP8 XQ [M,K] x MXFP4 WQ [N,K/2] -> BF16 [M,N]."""


@unavailable(ROCM_GFX950)
def matmul_mx8mx4bf16_grouped(XQ, WQ, x_scale, w_scale, offsets, output=None) -> torch.Tensor:
    """Offset-grouped MXFP8 x MXFP4 -> BF16."""
