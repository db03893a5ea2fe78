"""Grouped GEMMs at the spec's module path (mslk.gemm.triton.grouped_gemm).

The reference wrote these in Triton; here each is served by mslk's native ops:
grouped_gemm -> torch.ops.mslk.bf16bf16bf16_grouped_stacked, grouped_gemm_dgrad ->
bf16bf16bf16_grouped_grad, grouped_gemm_wgrad -> bf16bf16bf16_grouped_wgrad,
grouped_gemm_fp8_rowwise -> f8f8bf16_rowwise_grouped_stacked.

Layouts: x [total_M, K]; w [G, N, K] or the reference's flattened [G * N, K] (G =
len(m_sizes)); m_sizes [G] rows of each group, in order. Rows past sum(m_sizes) are zero.
dgrad: x = dY [total_M, N], w [G, N, K] (or [G * N, K]) -> dX [total_M, K].
wgrad: x = dY [total_M, N], w = X [total_M, K] -> dW [G, N, K] (output_accum: float32 output +=).

Differences from the reference: use_fast_accum and _use_warp_specialization are accepted and
ignored (bf16 sums are always float32); bias ([G, N] per expert) and token_weights ([total_M]
per row) are applied to the GEMM's unrounded float32 sums as (y + bias[g]) * token_weight, then
rounded once, as the reference's fused epilogue does (the GEMM writes float32 for it, then
torch applies the epilogue: one more pass over the output); _scatter_add_indices adds row i of
the result into row _scatter_add_indices[i] of _output_tensor.
"""

from __future__ import annotations

from typing import Optional

import torch

from mslk import _native

_native.load()

Tensor = torch.Tensor


def _w3(w: Tensor, G: int) -> Tensor:
    if w.dim() == 3:
        return w
    if w.dim() != 2 or G == 0 or w.shape[0] % G != 0:
        raise ValueError(f"w must be [G, N, K] or [G * N, K] with G = len(m_sizes) = {G}, got shape {tuple(w.shape)}")
    return w.view(G, w.shape[0] // G, w.shape[1])


def _row_groups(m_sizes: Tensor, total_M: int) -> Tensor:
    """Group index of every row (G for rows past every group), on the device, without a sync."""
    ends = torch.cumsum(m_sizes.to(torch.int64), 0)
    rows = torch.arange(total_M, device=m_sizes.device)
    return torch.searchsorted(ends, rows, right=True)


def _check_epilogue(x: Tensor, w3: Tensor, bias: Optional[Tensor], token_weights: Optional[Tensor],
                    _output_tensor: Optional[Tensor], _scatter_add_indices: Optional[Tensor]) -> None:
    """Shapes of the fused-epilogue arguments, each error naming its argument (no device sync)."""
    G, N, M = w3.shape[0], w3.shape[1], x.shape[0]
    if bias is not None and tuple(bias.shape) not in ((G, N), (G * N,)):
        raise ValueError(f"grouped_gemm: bias must be [G, N] = [{G}, {N}] (or [G * N]), got shape {tuple(bias.shape)}")
    if token_weights is not None and tuple(token_weights.shape) not in ((M,), (M, 1)):
        raise ValueError(f"grouped_gemm: token_weights must be [total_M] = [{M}] (one weight a row of x), "
                         f"got shape {tuple(token_weights.shape)}")
    if _scatter_add_indices is not None:
        if _output_tensor is None:
            raise ValueError("grouped_gemm: _scatter_add_indices needs _output_tensor (the rows are added into it)")
        if _scatter_add_indices.dim() != 1 or _scatter_add_indices.shape[0] != M or \
                _scatter_add_indices.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"grouped_gemm: _scatter_add_indices must be a 1-D int32/int64 tensor of total_M = {M} "
                             f"row indices, got shape {tuple(_scatter_add_indices.shape)}, "
                             f"dtype {_scatter_add_indices.dtype}")
        if _output_tensor.dim() != 2 or _output_tensor.shape[1] != N:
            raise ValueError(f"grouped_gemm: _output_tensor must be [rows, N = {N}] to scatter into, "
                             f"got shape {tuple(_output_tensor.shape)}")
    elif _output_tensor is not None and tuple(_output_tensor.shape) != (M, N):
        raise ValueError(f"grouped_gemm: _output_tensor must be [total_M, N] = [{M}, {N}], "
                         f"got shape {tuple(_output_tensor.shape)}")


def _epilogue(y: Tensor, m_sizes: Tensor, bias: Optional[Tensor], token_weights: Optional[Tensor],
              _output_tensor: Optional[Tensor], _scatter_add_indices: Optional[Tensor]) -> Tensor:
    """y: the GEMM's output, float32 (unrounded sums) when bias or token_weights is given."""
    if bias is not None or token_weights is not None:
        acc = y
        if bias is not None:
            G = m_sizes.shape[0]
            b = torch.cat([bias.reshape(G, -1).float(), bias.new_zeros((1, y.shape[1]), dtype=torch.float32)])
            acc = acc + b[_row_groups(m_sizes, y.shape[0])]
        if token_weights is not None:
            acc = acc * token_weights.reshape(-1, 1).float()
        y = acc.to(torch.bfloat16)
    if _output_tensor is None:
        return y
    if _scatter_add_indices is not None:
        return _output_tensor.index_add_(0, _scatter_add_indices, y.to(_output_tensor.dtype))
    return _output_tensor.copy_(y)


def grouped_gemm(x: Tensor, w: Tensor, m_sizes: Tensor, bias: Optional[Tensor] = None,
                 token_weights: Optional[Tensor] = None, use_fast_accum: bool = True, *,
                 _use_warp_specialization: bool = True, _output_tensor: Optional[Tensor] = None,
                 _scatter_add_indices: Optional[Tensor] = None) -> Tensor:
    """BF16 grouped x [total_M, K] @ w[g]^T -> [total_M, N], per group of rows given by m_sizes."""
    w3 = _w3(w, m_sizes.shape[0])
    _check_epilogue(x, w3, bias, token_weights, _output_tensor, _scatter_add_indices)
    fused = bias is not None or token_weights is not None
    plain = not fused and _scatter_add_indices is None
    out = _output_tensor if plain and _output_tensor is not None and _output_tensor.dtype == torch.bfloat16 else None
    if fused:  # float32 sums, so the epilogue rounds once
        out = x.new_empty((x.shape[0], w3.shape[1]), dtype=torch.float32)
    y = torch.ops.mslk.bf16bf16bf16_grouped_stacked(x, w3, m_sizes, out)
    if fused:
        return _epilogue(out, m_sizes, bias, token_weights, _output_tensor, _scatter_add_indices)
    if out is not None:
        return out
    return _epilogue(y, m_sizes, bias, token_weights, _output_tensor, _scatter_add_indices)


def grouped_gemm_fp8_rowwise(x: Tensor, w: Tensor, m_sizes: Tensor, x_scale: Tensor, w_scale: Tensor,
                             use_fast_accum: bool = True, *, _use_warp_specialization: bool = True,
                             _output_tensor: Optional[Tensor] = None,
                             _scatter_add_indices: Optional[Tensor] = None) -> Tensor:
    """Rowwise-scaled FP8 grouped GEMM: x_scale[m] * w_scale[g, n] * (x_g @ w[g]^T) -> BF16 [total_M, N]."""
    w3 = _w3(w, m_sizes.shape[0])
    _check_epilogue(x, w3, None, None, _output_tensor, _scatter_add_indices)
    y = torch.ops.mslk.f8f8bf16_rowwise_grouped_stacked(x, w3, x_scale, w_scale.reshape(-1), m_sizes)
    return _epilogue(y, m_sizes, None, None, _output_tensor, _scatter_add_indices)


def grouped_gemm_dgrad(x: Tensor, w: Tensor, m_sizes: Tensor, out: Optional[Tensor] = None,
                       num_sms: Optional[int] = None) -> Tensor:
    """Data gradient: x = dY [total_M, N], w [G, N, K] -> dX [total_M, K] = dY_g @ w[g]."""
    return torch.ops.mslk.bf16bf16bf16_grouped_grad(x, _w3(w, m_sizes.shape[0]), m_sizes, out, num_sms)


def grouped_gemm_wgrad(x: Tensor, w: Tensor, m_sizes: Tensor, output: Optional[Tensor] = None,
                       output_accum: bool = False, num_sms: Optional[int] = None) -> Tensor:
    """Weight gradient: x = dY [total_M, N], w = X [total_M, K] -> dW [G, N, K] = dY_g^T @ X_g."""
    return torch.ops.mslk.bf16bf16bf16_grouped_wgrad(x, w, m_sizes, output, output_accum, num_sms)
