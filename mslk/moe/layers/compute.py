"""SwiGLU expert math on mslk ops: grouped GEMM -> silu_mul -> grouped GEMM over rows grouped by
expert (m_sizes rows each; rows past their sum come out zero, so no host sync is needed)."""

from typing import Optional, Tuple, Union

import torch

from mslk import _ops  # noqa: F401  (registers the ops)
from mslk.moe.activation import silu_mul, silu_mul_quant
from mslk.quantize.triton.fp8_quantize import quantize_fp8_row

from .params import Experts

# Rows: bf16 [A, D], or FP8 rows with their float32 scales ((xq [A, D], xs [A])).
Rows = Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]


def swiglu(experts: Experts, rows: Rows, m_sizes: torch.Tensor,
           valid_token_count: Optional[torch.Tensor] = None) -> torch.Tensor:
    """bf16 [A, D]: w2 @ (silu(w_in @ x) * (w_swiglu @ x)) per expert segment."""
    H = experts.w2.shape[-1]
    m_sizes = m_sizes.to(torch.int64)
    if experts.is_fp8_rowwise:
        xq, xs = rows if isinstance(rows, tuple) else quantize_fp8_row(rows)
        h = torch.ops.mslk.f8f8bf16_rowwise_grouped_stacked(xq, experts.w13.weights, xs.float(),
                                                            experts.w13.scales, m_sizes)
        yq, ys = silu_mul_quant(h[:, :H], h[:, H:], None, valid_token_count)
        return torch.ops.mslk.f8f8bf16_rowwise_grouped_stacked(yq, experts.w2.weights, ys, experts.w2.scales,
                                                               m_sizes)
    if isinstance(rows, tuple):
        raise TypeError("swiglu: FP8 rows given to BF16 experts")
    h = torch.ops.mslk.bf16bf16bf16_grouped_stacked(rows, experts.w13.weights, m_sizes)
    y = silu_mul(h[:, :H], h[:, H:], valid_token_count)
    return torch.ops.mslk.bf16bf16bf16_grouped_stacked(y, experts.w2.weights, m_sizes)


def shared_swiglu(experts: Experts, x: torch.Tensor) -> torch.Tensor:
    """The shared expert over all rows of x [T, D] (one group)."""
    m = torch.full((1,), x.shape[0], dtype=torch.int64, device=x.device)
    return swiglu(experts, x, m)
