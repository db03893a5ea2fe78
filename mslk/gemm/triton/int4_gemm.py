"""INT4-weight GEMMs at the spec's module path (mslk.gemm.triton.int4_gemm).

The reference wrote them in Triton; here they are thin calls into torch.ops.mslk.bf16i4bf16_rowwise
and bf16i4bf16_rowwise_batched (CUDA kernels on Hopper tensors, the exact CPU reference on CPU
tensors): X [M, K] bf16, W [N, K/2] int8 with two int4 values a byte (even k in the low nibble),
group scales and zeros [K/group, N] (bf16 or float32), a weight being q * scale + zero; BF16
[M, N] output.
"""

from __future__ import annotations

import torch

from mslk import _native

_native.load()

Tensor = torch.Tensor


def matmul_bf16i4_rowwise(X: Tensor, W: Tensor, w_scale_group: Tensor, w_zero_group: Tensor) -> Tensor:
    """X [M, K] bf16 @ dequant(W [N, K/2])^T -> BF16 [M, N]."""
    return torch.ops.mslk.bf16i4bf16_rowwise(X, W, w_scale_group, w_zero_group)


def matmul_bf16i4_rowwise_batched(X: Tensor, W: Tensor, w_scale: Tensor, w_zp: Tensor) -> Tensor:
    """X [B, M, K] bf16 @ dequant(W [B, N, K/2])^T per batch, scales [B, K/group, N] -> BF16 [B, M, N]."""
    return torch.ops.mslk.bf16i4bf16_rowwise_batched(X, W, w_scale, w_zp)
