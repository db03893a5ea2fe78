"""Fused SwiGLU (`mslk.moe.activation`): y = x0 * sigmoid(x0) * x1, row by row, optionally
quantized to FP8 rowwise (scale = clamp(row amax, 1e-12, scale_ub) / 448, RNE, saturating).
Rows at or past valid_token_count are unspecified."""

from typing import Optional

import torch

from mslk import _ops  # noqa: F401  (registers the ops)


def silu_mul(x0: torch.Tensor, x1: torch.Tensor, valid_token_count: Optional[torch.Tensor] = None) -> torch.Tensor:
    return torch.ops.mslk.silu_mul(x0, x1, valid_token_count)


def silu_mul_quant(x0: torch.Tensor, x1: torch.Tensor, scale_ub: Optional[torch.Tensor] = None,
                   valid_token_count: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (FP8 e4m3fn [T, D], float32 reciprocal scale per row [T])."""
    return torch.ops.mslk.silu_mul_quant(x0, x1, scale_ub, valid_token_count)
