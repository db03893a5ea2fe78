"""INT8 GEMMs at the spec's module path (mslk.gemm.triton.int8_gemm).

The reference wrote them in Triton; here they are thin calls into torch.ops.mslk.i8i8bf16 and
i8i8bf16_dynamic (a CUTLASS sm90 INT8 kernel on Hopper tensors, the exact CPU reference on CPU
tensors): XQ [M, K] and WQ [N, K] int8 (K a multiple of 16), int32 accumulation, the sum times
`scale` in float32, BF16 [M, N] output. split_k is accepted for parity; the int32 sum is exact,
so it never changes the result.
"""

from __future__ import annotations

import torch

from mslk import _native

_native.load()

Tensor = torch.Tensor


def i8i8bf16_triton(XQ: Tensor, WQ: Tensor, scale: float, split_k: int = 1) -> Tensor:
    """XQ [M, K] @ WQ [N, K].T (int8, int32 accumulation) times the float `scale` -> BF16 [M, N]."""
    return torch.ops.mslk.i8i8bf16(XQ, WQ, float(scale), split_k)


def i8i8bf16_dynamic_triton(XQ: Tensor, WQ: Tensor, scale: Tensor, split_k: int = 1) -> Tensor:
    """As i8i8bf16_triton with `scale` a float32 tensor of one element on the operands' device."""
    return torch.ops.mslk.i8i8bf16_dynamic(XQ, WQ, scale, split_k)
