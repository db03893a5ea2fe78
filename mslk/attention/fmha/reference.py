"""Reference forward operator: exact, unfused attention (the CPU / general fallback).

Masks are materialized into a dense additive bias and the native op
`torch.ops.mslk.fmha_reference_fwd` computes softmax(scale * q k^T + bias) v in float32 (float64
for float64 inputs). It is registered for CPU, and for CUDA in CUDA builds (ATen ops; correct but
slow: it builds the [B, H, Mq, Mkv] score matrix). LSE is packed for variable-length biases
([1, H, total_Mq]).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha.common import AttentionFwOpBase, Context, Inputs, _kernel_registered

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
    to [B, H, Mq, Mkv] (float32)."""
    if attn_bias is None:
        return None
    if isinstance(attn_bias, torch.Tensor):
        return attn_bias.float()
    Mq, Mkv = q.shape[1], k.shape[1]
    if isinstance(attn_bias, _ab.LowerTriangularMaskWithTensorBias):
        causal = _ab.LowerTriangularMask().materialize((Mq, Mkv), torch.float32, q.device)
        return causal + attn_bias._bias.float().to(q.device)
    return attn_bias.materialize((Mq, Mkv), torch.float32, q.device)


class FwOp(AttentionFwOpBase):
    """Exact reference attention forward (all masks, all layouts, Kv != K, partial, output_dtype)."""

    OPERATOR = None  # resolved lazily: torch.ops.mslk.fmha_reference_fwd
    NAME = "reference"
    SUPPORTED_DEVICES = {"cpu", "cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (0, 0)
    SUPPORTED_DTYPES = {torch.float32, torch.float16, torch.bfloat16, torch.float64}
    SUPPORTED_MAX_K = float("inf")
    SUPPORTED_MIN_K = 0
    SUPPORTED_ATTN_BIAS_TYPES = _ALL_BIASES
    SUPPORTS_DROPOUT = False
    SUPPORTS_CUSTOM_SCALE = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
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
        out, lse = torch.ops.mslk.fmha_reference_fwd(q, k, v, b, inp.scale_float, inp.get_output_dtype())
        if grouped:
            out = out.reshape(B, Mq, G, H, out.shape[-1])
            lse = lse.reshape(B, G, H, Mq)
        if inp.query.ndim == 3:
            out = out[:, :, 0]
        return out, Context(lse=lse, out=out)
