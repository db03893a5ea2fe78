"""Grouped groupwise FP8 GEMM at the spec's module path
(mslk.gemm.triton.fp8_groupwise_grouped_gemm).

The reference wrote it in Triton; here it is a thin call into
torch.ops.mslk.f8f8bf16_groupwise_grouped, with the op's layouts: XQ [total_M, K], WQ [G, N, K],
M_sizes [G] (rows of each group, in order; rows past their sum are zero), x_scale
[total_M, K/128] with each group's scales M-major inside its rows (as
quantize_fp8_group(x, 128, m_sizes=M_sizes, k_major=False) writes them), w_scale
[G, K/128, N/128]. The group sizes are read to the host (one GEMM per group).
"""

from __future__ import annotations

from typing import Optional

import torch

from mslk import _native
from mslk.gemm.triton.fp8_groupwise_gemm import _into

_native.load()

Tensor = torch.Tensor


def matmul_f8f8bf16_groupwise_grouped(XQ: Tensor, WQ: Tensor, x_scale: Tensor, w_scale: Tensor, M_sizes: Tensor,
                                      output: Optional[Tensor] = None) -> Tensor:
    """Stacked grouped XQ [total_M, K] @ WQ[g].T with K-group scales -> BF16 [total_M, N]."""
    out = torch.ops.mslk.f8f8bf16_groupwise_grouped(XQ, WQ, x_scale, w_scale, M_sizes)
    return _into(out, output, "matmul_f8f8bf16_groupwise_grouped")
