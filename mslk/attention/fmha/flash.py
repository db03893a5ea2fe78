"""FlashAttention 2 (the spec's `flash` classes), backed by mslk's fused attention ops.

`FwOp` runs `torch.ops.mslk.fmha_fused_fwd` -- the same kernels as cutlass.FwOp (the Hopper kernel
on sm_90 where it applies, paged K/V included; the FlashAttention-2 style kernel otherwise and for
dropout) -- with FlashAttention 2's contract: fp16/bf16, K == Kv <= 256, no tensor bias, dropout,
packed variable-length LSE ([1, H, total_Mq], VARLEN_LSE_PACKED), paged K/V with a page size
divisible by 256. GQA/MQA (BMGHK with K/V expanded along H, or BMHK with expanded heads) reads K/V
in place. What it does not have: partial attention / custom output dtype (the kernel writes the
query dtype). `BwOp` runs `torch.ops.mslk.fmha_fused_bwd` (see _backward.py) within FlashAttention
2's backward contract (fp16/bf16, K == Kv <= 256, dropout, dense / local / block-diagonal masks,
no BMGHK). Both are available wherever the fused ops have CUDA kernels.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import _raw_ops  # (registers the raw backend ops, spec "Raw backend ops")
from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha import cutlass as _cutlass
from mslk.attention.fmha._backward import FusedBw, draw_rng_state
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Context, Inputs

NO_FUSED_KERNEL = "needs a CUDA build of mslk (torch.ops.mslk.fmha_fused_fwd has no CUDA kernel here)"


def fused_apply(cls, inp: Inputs) -> Tuple[torch.Tensor, Context]:
    """apply() of the FlashAttention classes: the mask descriptor of cutlass.FwOp
    (cutlass.mask_descriptor) and the fused op through _raw_ops.fused_attention, which reads
    grouped K/V in place. LSE: [B, H, M] ([B, G, H, M] for BMGHK); for variable-length biases
    packed [1, H, total_Mq] when cls.VARLEN_LSE_PACKED, else padded [num_seqs, H, max_Mq] (+inf
    past each sequence), as cutlass.FwOp. With dropout (inp.p > 0) grouped K/V are expanded to
    one head per query head: the dropout mask is indexed by query head, as the backward reads it."""
    q, k, v = inp.query, inp.key, inp.value
    dropout = inp.p > 0.0
    ndim = q.ndim
    if ndim == 3:
        q, k, v = q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)
    if ndim == 5:
        B, Mq, G, H, K = q.shape
        q = q.reshape(B, Mq, G * H, K)
        if not dropout and (H == 1 or (k.stride(3) == 0 and v.stride(3) == 0)):
            # K/V expanded along H (GQA/MQA): one K/V head per group, read in place
            k, v = k[:, :, :, 0], v[:, :, :, 0]
        else:
            k = k.reshape(B, k.shape[1], G * H, k.shape[-1])
            v = v.reshape(B, v.shape[1], G * H, v.shape[-1])
    bias = inp.attn_bias
    desc = _cutlass.mask_descriptor(bias, q.device)
    if desc.pop("bias") is not None:
        raise NotImplementedError(f"{cls.NAME}: tensor biases are not supported")
    rng = None
    if dropout:
        rng = draw_rng_state()
        out, lse = torch.ops.mslk.fmha_fused_fwd(q, k, v, None, scale=inp.scale_float, dropout_p=float(inp.p),
                                                 rng_state=rng, **desc)
    else:
        out, lse = _raw_ops.fused_attention(q, k, v, scale=inp.scale_float, **desc)
    if isinstance(bias, _ab.VARLEN_BIASES) and not cls.VARLEN_LSE_PACKED:
        lse = _cutlass._packed_to_padded_lse(lse, bias.q_seqinfo.seqstart_py, bias.q_seqinfo.max_seqlen)
    if ndim == 5:
        out = out.reshape(B, Mq, G, H, out.shape[-1])
        lse = lse.reshape(lse.shape[0], G, H, lse.shape[-1])
    if ndim == 3:
        out = out[:, :, 0]
    return out, Context(lse=lse, out=out, rng_state=rng)


class FwOp(AttentionFwOpBase):
    """FlashAttention 2 forward on mslk's fused kernel (fp16/bf16, K == Kv <= 256, dropout)."""

    OPERATOR = None  # resolved lazily: torch.ops.mslk.fmha_fused_fwd
    NAME = "fa2F"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (8, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    SUPPORTED_MIN_K = 1
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.STANDARD_MASKS, *_b.PAGED_MASKS[:3])
    SUPPORTS_DROPOUT = True  # the FlashAttention-2 style kernel applies it
    SUPPORTS_CUSTOM_SCALE = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = False
    SUPPORTS_OUTPUT_DTYPE = False
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = False  # the kernel writes the query dtype, not the float32 a partial needs
    IS_DETERMINISTIC = True
    VARLEN_LSE_PACKED = True
    PAGE_SIZE_MULTIPLE = 256
    UNAVAILABLE_REASON = NO_FUSED_KERNEL

    @classmethod
    def is_available(cls) -> bool:
        return _raw_ops.fused_cuda_registered()

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        reasons = super().not_supported_reasons(d)
        b = d.attn_bias
        if isinstance(b, _ab._PagedBase) and b.page_size % cls.PAGE_SIZE_MULTIPLE != 0:
            reasons.append(f"paged K/V: page_size={b.page_size} is not divisible by {cls.PAGE_SIZE_MULTIPLE}")
        if d.p != 0.0 and isinstance(b, _ab._PagedBase):
            reasons.append("dropout with paged K/V")
        return reasons

    @classmethod
    def apply(cls, inp: Inputs, needs_gradient: bool) -> Tuple[torch.Tensor, Optional[Context]]:
        return fused_apply(cls, inp)


class BwOp(FusedBw, AttentionBwOpBase):
    """FlashAttention 2 backward on torch.ops.mslk.fmha_fused_bwd (fp16/bf16, K == Kv <= 256, dropout)."""

    NAME = "fa2B"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (8, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS)
    SUPPORTS_DROPOUT = True
    SUPPORTS_BMGHK = False  # grouped-head BMGHK is forward-only
    VARLEN_LSE_PACKED = True
