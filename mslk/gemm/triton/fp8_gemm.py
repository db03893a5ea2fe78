"""FP8 GEMMs at the spec's module path (mslk.gemm.triton.fp8_gemm).

The reference wrote these in Triton; here each is a thin call into mslk's native op (a CUTLASS
sm90 kernel on Hopper tensors, a portable CUDA kernel for other shapes, the exact CPU reference
on CPU tensors). Scales are reciprocal (dequantization multipliers):
out = a_scale[..., m] * b_scale[n] * (a @ b.T)[..., m, n] (+ bias[n]), in BF16.

Differences from the reference: the Triton tuning knobs (allow_tf32, imprecise_acc,
tma_persistent, no_use_persistent, use_warp_specialization) are accepted and ignored;
dot_out_dtype names the accumulator type and must be None or torch.float32; higher-rank `a`
works under torch.compile too (the fake implementation keeps the leading dims).
to_mxfp8 (an MX format) raises until this build makes MX kernels (mslk.utils.unavailable).
"""

from __future__ import annotations

from typing import Optional

import torch

from mslk import _native
from mslk.utils.unavailable import FP4, unavailable

_native.load()

Tensor = torch.Tensor


def matmul_fp8_row(a: Tensor, b: Tensor, a_scale: Tensor, b_scale: Tensor, bias: Optional[Tensor] = None,
                   dot_out_dtype: Optional[torch.dtype] = None, allow_tf32: bool = True,
                   fp8_fast_accum: bool = True, imprecise_acc: bool = False, tma_persistent: bool = True,
                   no_use_persistent: Optional[bool] = None, use_warp_specialization: bool = False) -> Tensor:
    """Rowwise-scaled FP8 a [..., M, K] @ b [N, K].T -> BF16 [..., M, N]."""
    return torch.ops.triton.matmul_fp8_row(a, b, a_scale, b_scale, bias, dot_out_dtype, allow_tf32,
                                           fp8_fast_accum, imprecise_acc, tma_persistent, no_use_persistent,
                                           use_warp_specialization)


@unavailable(FP4)
def to_mxfp8(data_hp: Tensor, block_size=32) -> tuple[Tensor, Tensor]:
    """MXFP8 with E8M0 block scales; returns (scale_e8m0_biased, data_fp8), scales first."""
