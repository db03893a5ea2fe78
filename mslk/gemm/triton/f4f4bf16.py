"""Triton MXFP4 GEMMs of AMD gfx950 (spec group "GEMM - Triton groupwise & microscaling").

gfx950-only kernels (native block-scaled MFMA): in this NVIDIA build every function exists with
the spec's signature and raises (mslk.utils.unavailable).
"""

from __future__ import annotations

import torch

from mslk.utils.unavailable import ROCM_GFX950, unavailable


@unavailable(ROCM_GFX950)
def mxfp4_gemm(XQ, WQ, x_scale, w_scale, output=None) -> torch.Tensor:
    """Packed MXFP4 XQ [M,K/2] x WQ [N,K/2] -> BF16 [M,N]."""


@unavailable(ROCM_GFX950)
def mxfp4_grouped_mm(XQ, WQ, x_scale, w_scale, offsets, output=None, global_scale=None) -> torch.Tensor:
    """Offset-grouped MXFP4: XQ [total_M,K/2] x WQ [G,K/2,N] -> BF16 [total_M,N]."""


@unavailable(ROCM_GFX950)
def mxfp4_grouped_stacked_gemm(XQ, WQ, x_scale, w_scale, M_sizes, output=None, global_scale=None,
                               starting_row_after_padding=None, use_mx=True, offsets_override=None) -> torch.Tensor:
    """Stacked grouped MXFP4 (use_mx must be True)."""


@unavailable(ROCM_GFX950)
def f4f4bf16(XQ, WQ, x_scale, w_scale, output=None, global_scale=None, mxfp4_block_size=32) -> torch.Tensor:
    """ROCm twin of torch.ops.mslk.f4f4bf16 for standard MXFP4 (block 32, no global scale)."""
