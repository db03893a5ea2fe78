"""Reference operators: exact, unfused attention (the CPU / general fallback).

FwOp: masks are materialized into a dense additive bias and the native op
`torch.ops.mslk.fmha_reference_fwd` computes softmax(scale * q k^T + bias) v in float32 (float64
for float64 inputs). It is registered for CPU, and for CUDA in CUDA builds (ATen ops; correct but
slow: it builds the [B, H, Mq, Mkv] score matrix). LSE is packed for variable-length biases
([1, H, total_Mq]). With dropout it computes the same math in torch with the keep mask of
`torch.ops.mslk.fmha_dropout_mask` (the fused ops' mask, so any backward reproduces it).

BwOp (this build's addition beside FwOp): `torch.ops.mslk.fmha_fused_bwd` on the forward's mask
descriptor (see _backward.py), whose CPU implementation is the exact reference backward: every
non-paged mask, tensor-bias gradient, dropout, any dtype and head dim, CPU and CUDA.
"""

from __future__ import annotations

from typing import Optional, Tuple

import math

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha._backward import FusedBw, bwd_registered, draw_rng_state
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Context, Inputs, _kernel_registered

_OP_NAME = "mslk::fmha_reference_fwd"

_ALL_BIASES = (
    type(None), torch.Tensor, _ab.LowerTriangularMask, _ab.LowerTriangularMaskWithTensorBias,
    _ab.LowerTriangularFromBottomRightMask, _ab.LowerTriangularFromBottomRightLocalAttentionMask,
    _ab.LocalAttentionFromBottomRightMask, _ab.BlockDiagonalMask, _ab.BlockDiagonalCausalMask,
    _ab.BlockDiagonalCausalFromBottomRightMask, _ab.BlockDiagonalCausalLocalAttentionMask,
    _ab.BlockDiagonalCausalLocalAttentionFromBottomRightMask, _ab.BlockDiagonalPaddedKeysMask,
    _ab.BlockDiagonalCausalWithOffsetPaddedKeysMask, _ab.BlockDiagonalLocalAttentionPaddedKeysMask,
    _ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask, _ab.PagedBlockDiagonalPaddedKeysMask,
    _ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask, _ab.PagedBlockDiagonalCausalLocalPaddedKeysMask,
    _ab.BlockDiagonalGappyKeysMask, _ab.BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask,
    _ab.BlockDiagonalCausalWithOffsetGappyKeysMask, _ab.PagedBlockDiagonalGappyKeysMask,
    _ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask,
)


def dense_bias(attn_bias, q: torch.Tensor, k: torch.Tensor) -> Optional[torch.Tensor]:
    """The additive bias of `attn_bias` for 4-D q [B, Mq, H, K] and k [B, Mkv, H, K], broadcastable
    to [B, H, Mq, Mkv] (float32; float64 for float64 inputs, so tensor biases keep their precision)."""
    if attn_bias is None:
        return None
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    if isinstance(attn_bias, torch.Tensor):
        return attn_bias.to(acc)
    Mq, Mkv = q.shape[1], k.shape[1]
    if isinstance(attn_bias, _ab.LowerTriangularMaskWithTensorBias):
        causal = _ab.LowerTriangularMask().materialize((Mq, Mkv), acc, q.device)
        return causal + attn_bias._bias.to(device=q.device, dtype=acc)
    return attn_bias.materialize((Mq, Mkv), torch.float32, q.device)


class _Exact:
    """What both reference operators take (listed before the operator base class)."""

    SUPPORTED_DEVICES = {"cpu", "cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (0, 0)
    SUPPORTED_DTYPES = {torch.float32, torch.float16, torch.bfloat16, torch.float64}
    SUPPORTED_MAX_K = float("inf")
    SUPPORTED_MIN_K = 0
    SUPPORTS_DROPOUT = True
    SUPPORTS_CUSTOM_SCALE = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True


class FwOp(_Exact, AttentionFwOpBase):
    """Exact reference attention forward (all masks, all layouts, Kv != K, partial, output_dtype)."""

    OPERATOR = None  # resolved lazily: torch.ops.mslk.fmha_reference_fwd
    NAME = "reference"
    SUPPORTED_ATTN_BIAS_TYPES = _ALL_BIASES
    SUPPORTS_OUTPUT_DTYPE = True
    SUPPORTS_PARTIAL = True
    SUPPORTS_BMGHK = True
    IS_DETERMINISTIC = True
    VARLEN_LSE_PACKED = True
    UNAVAILABLE_REASON = None

    @classmethod
    def is_available(cls) -> bool:
        return hasattr(torch.ops.mslk, "fmha_reference_fwd")

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        reasons = super().not_supported_reasons(d)
        if not cls.is_available():
            reasons.append("operator is not available: the native library (mslk::fmha_reference_fwd) is not loaded")
        elif d.query.device.type == "cuda" and not _kernel_registered(_OP_NAME, "CUDA"):
            reasons.append("no CUDA attention kernel yet: mslk::fmha_reference_fwd has no CUDA registration in "
                           "this build")
        return reasons

    @classmethod
    def apply(cls, inp: Inputs, needs_gradient: bool) -> Tuple[torch.Tensor, Optional[Context]]:
        q, k, v = inp.query, inp.key, inp.value
        if q.ndim == 3:
            q, k, v = q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)
        bias = inp.attn_bias
        if isinstance(bias, torch.Tensor) and inp.query.ndim == 3 and bias.ndim == 3:
            bias = bias.unsqueeze(1)
        grouped = q.ndim == 5
        if grouped:
            B, Mq, G, H, K = q.shape
            q = q.reshape(B, Mq, G * H, K)
            k = k.reshape(B, k.shape[1], G * H, k.shape[-1])
            v = v.reshape(B, v.shape[1], G * H, v.shape[-1])
        b = dense_bias(bias, q, k)
        if grouped and b is not None and b.ndim >= 3:
            # [.., G, H, Mq, Mkv] broadcast -> [B, G*H, Mq, Mkv]
            b = b.expand(B, G, H, q.shape[1], k.shape[1]).reshape(B, G * H, q.shape[1], k.shape[1])
        rng = None
        if inp.p > 0.0:
            rng = draw_rng_state()
            out, lse = _dropout_attention(q, k, v, b, inp.scale_float, float(inp.p), rng, inp.get_output_dtype())
        else:
            out, lse = torch.ops.mslk.fmha_reference_fwd(q, k, v, b, inp.scale_float, inp.get_output_dtype())
        if grouped:
            out = out.reshape(B, Mq, G, H, out.shape[-1])
            lse = lse.reshape(B, G, H, Mq)
        if inp.query.ndim == 3:
            out = out[:, :, 0]
        return out, Context(lse=lse, out=out, rng_state=rng)


def _dropout_attention(q, k, v, bias, scale: float, p: float, rng_state: torch.Tensor, out_dtype: torch.dtype):
    """softmax(scale q k^T + bias) with the fused ops' dropout keep mask, times v (float32 math,
    float64 for float64). q [B, Mq, H, K], k/v [B, Mkv, H, *]; LSE of the undropped softmax."""
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = torch.einsum("bmhk,bnhk->bhmn", q.to(acc), k.to(acc)) * scale
    if bias is not None:
        s = s + bias.to(acc)
    lse = torch.logsumexp(s, dim=-1) if s.shape[-1] else s.new_full(s.shape[:-1], -math.inf)
    finite = torch.isfinite(lse).unsqueeze(-1)
    prob = torch.where(finite, torch.exp(s - torch.where(finite, lse.unsqueeze(-1), 0.0)), 0.0)
    B, H, Mq, Mkv = s.shape
    keep = torch.ops.mslk.fmha_dropout_mask(rng_state, B, H, Mq, Mkv, p, q.device)
    prob = prob * keep.to(acc) / (1.0 - p)
    out = torch.einsum("bhmn,bnhk->bmhk", prob, v.to(acc)).to(out_dtype)
    return out, lse


class BwOp(_Exact, FusedBw, AttentionBwOpBase):
    """Exact reference backward (torch.ops.mslk.fmha_fused_bwd: its CPU kernel, or the CUDA one):
    every non-paged mask, bias gradient, dropout, all dtypes and head dims, CPU and CUDA."""

    NAME = "referenceB"
    SUPPORTED_ATTN_BIAS_TYPES = tuple(t for t in _ALL_BIASES if not issubclass(t, _ab._PagedBase))
    SUPPORTS_BMGHK = True
    SUPPORTS_ATTN_BIAS_GRAD = True
    SUPPORTS_UNPADDED_LSE = True
    VARLEN_LSE_PACKED = True
    UNAVAILABLE_REASON = "the native library (mslk::fmha_fused_bwd) is not loaded"

    @classmethod
    def is_available(cls) -> bool:
        return bwd_registered("CPU") or bwd_registered("CUDA")

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        reasons = super().not_supported_reasons(d)
        if cls.is_available() and not bwd_registered("CUDA" if d.query.device.type == "cuda" else "CPU"):
            reasons.append(f"mslk::fmha_fused_bwd has no {d.query.device.type} kernel in this build")
        return reasons
