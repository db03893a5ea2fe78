"""Groupwise FP8 GEMM at the spec's module path (mslk.gemm.triton.fp8_groupwise_gemm).

The reference wrote it in Triton; here it is a thin call into torch.ops.mslk.f8f8bf16_groupwise
(a CUTLASS sm90 kernel on Hopper tensors, the exact CPU reference on CPU tensors), with the op's
layouts: XQ [M, K], WQ [N, K] (float8_e4m3fn), x_scale [K/128, M] (one scale per row and 128 of
K, MN-major: quantize_fp8_group(x, 128, k_major=False)), w_scale [K/128, N/128] (one per
128 x 128 block, MN-major: quantize_fp8_block(w, 128, 128, k_major=False)). Scales are reciprocal
(dequantization multipliers), applied per 128-K block to float32 partial sums; BF16 output.
"""

from __future__ import annotations

from typing import Optional

import torch

from mslk import _native

_native.load()

Tensor = torch.Tensor


def _into(out: Tensor, output: Optional[Tensor], name: str) -> Tensor:
    if output is None:
        return out
    if output.shape != out.shape or output.dtype != out.dtype or output.device != out.device:
        raise ValueError(f"{name}: argument 'output' must be a {out.dtype} tensor of shape {tuple(out.shape)} on "
                         f"{out.device}, got {output.dtype} {tuple(output.shape)} on {output.device}")
    output.copy_(out)
    return output


def matmul_f8f8bf16_groupwise(XQ: Tensor, WQ: Tensor, x_scale: Tensor, w_scale: Tensor,
                              output: Optional[Tensor] = None) -> Tensor:
    """XQ [M, K] @ WQ [N, K].T with K-group scales -> BF16 [M, N] (into `output` when given)."""
    return _into(torch.ops.mslk.f8f8bf16_groupwise(XQ, WQ, x_scale, w_scale), output, "matmul_f8f8bf16_groupwise")
