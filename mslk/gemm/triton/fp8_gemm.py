"""FP8 GEMMs at the spec's module path (mslk.gemm.triton.fp8_gemm).

The reference wrote these in Triton; here each is a thin call into mslk's native op (a CUTLASS
sm90 kernel on Hopper tensors, a portable CUDA kernel for other shapes, the exact CPU reference
on CPU tensors). Scales are reciprocal (dequantization multipliers):
out = a_scale[..., m] * b_scale[n] * (a @ b.T)[..., m, n] (+ bias[n]), in BF16 unless
dot_out_dtype names another result dtype (torch.float16 or torch.float32; the accumulator is
float32 either way). On CUDA a float16 / float32 result comes from the portable kernel.

Differences from the reference: the Triton tuning knobs (allow_tf32, imprecise_acc,
tma_persistent, no_use_persistent, use_warp_specialization) are accepted and ignored;
higher-rank `a` works under torch.compile too, and the fake implementations report the
dot_out_dtype result (the reference's always report BF16).
matmul_fp8_block: a_scale [ceil(M / scale_block_m), ceil(K / scale_block_k)] and b_scale
[ceil(N / scale_block_n), ceil(K / scale_block_k)] (K-major grids, as quantize_fp8_block writes
them); the scales are applied per K block to float32 partial sums. On CUDA scale_block_n and
scale_block_k must be multiples of 128 (any scale_block_m); the CPU reference takes any.
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


def matmul_fp8_block(a: Tensor, b: Tensor, a_scale: Tensor, b_scale: Tensor, scale_block_m: int = 256,
                     scale_block_n: int = 256, scale_block_k: int = 256, dot_out_dtype: Optional[torch.dtype] = None,
                     allow_tf32: bool = True, fp8_fast_accum: bool = True) -> Tensor:
    """Block-scaled FP8 a [..., M, K] @ b [N, K].T -> BF16 [..., M, N]."""
    return torch.ops.triton.matmul_fp8_block(a, b, a_scale, b_scale, scale_block_m, scale_block_n, scale_block_k,
                                             dot_out_dtype, allow_tf32, fp8_fast_accum)


@unavailable(FP4)
def to_mxfp8(data_hp: Tensor, block_size=32) -> tuple[Tensor, Tensor]:
    """MXFP8 with E8M0 block scales; returns (scale_e8m0_biased, data_fp8), scales first."""
