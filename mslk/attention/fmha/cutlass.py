"""General CUDA attention (the spec's `cutlass` class), backed by mslk's own fused kernels.

`FwOp` runs `torch.ops.mslk.fmha_fused_fwd` (csrc/attention/kernels/fmha_fwd_kernel.cuh): a
FlashAttention-2 style forward on SM80+ tensor cores (mma.sync), with every supported mask
evaluated inside the kernel from a small descriptor. What it supports today is a subset of the
spec's cutlass contract (which allows FP32 and head dims up to 65536): fp16/bf16, head dims up to
256 (K != Kv allowed), dropout, BMK/BMHK/BMGHK layouts, and the masks in
SUPPORTED_ATTN_BIAS_TYPES, paged K/V included (read through the block table inside the kernel).
Varlen LSE uses the padded layout [num_seqs, H, max_Mq] (+inf past each sequence), as the spec's
cutlass does. On sm_90 the op runs a FlashAttention-3-style Hopper kernel
(csrc/attention/kernels/fmha_fwd_sm90_kernel.cuh) for every problem without dropout, tensor biases
and paged K/V included; the environment variable MSLK_FMHA_KERNEL (auto / sm80 / sm90) overrides the
choice.

`BwOp` runs `torch.ops.mslk.fmha_fused_bwd` (see _backward.py): fp16/bf16/fp32, dropout (the
forward's rng_state), the tensor-bias gradient, BMK/BMHK/BMGHK, K != Kv; it takes the padded or
the packed variable-length LSE. Both classes are available wherever the ops have CUDA kernels.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha._backward import FusedBw, draw_rng_state
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Context, Inputs, _kernel_registered

_OP_NAME = "mslk::fmha_fused_fwd"

# mask_kind values of mslk::fmha_fused_fwd
MASK_NONE, MASK_CAUSAL_TOP_LEFT, MASK_CAUSAL_BOTTOM_RIGHT, MASK_LOCAL_BOTTOM_RIGHT = 0, 1, 2, 3

_DENSE_MASKS = (
    type(None), torch.Tensor, _ab.LowerTriangularMask, _ab.LowerTriangularMaskWithTensorBias,
    _ab.LowerTriangularFromBottomRightMask, _ab.LowerTriangularFromBottomRightLocalAttentionMask,
    _ab.LocalAttentionFromBottomRightMask,
)
_VARLEN_MASKS = (
    *_b.VARLEN_MASKS, *_b.PADDED_MASKS, _ab.BlockDiagonalGappyKeysMask, _ab.BlockDiagonalCausalWithOffsetGappyKeysMask,
    _ab.BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask,
)


def _kind(causal: bool, bottom_right: bool) -> int:
    if causal:
        return MASK_CAUSAL_BOTTOM_RIGHT if bottom_right else MASK_CAUSAL_TOP_LEFT
    return MASK_LOCAL_BOTTOM_RIGHT if bottom_right else MASK_NONE


def mask_descriptor(attn_bias: Any, device: Optional[torch.device] = None) -> Dict[str, Any]:
    """The keyword arguments of `torch.ops.mslk.fmha_fused_fwd` that describe `attn_bias` (mask_kind,
    window_left, window_right, seqstart_q, seqstart_k, seqlen_k, max_seqlen_q, bias). Raises
    NotImplementedError for an unsupported bias type."""
    d: Dict[str, Any] = dict(mask_kind=MASK_NONE, window_left=-1, window_right=-1, seqstart_q=None,
                             seqstart_k=None, seqlen_k=None, max_seqlen_q=-1, bias=None, block_tables=None,
                             page_size=0)
    t = type(attn_bias)
    if attn_bias is None:
        return d
    if isinstance(attn_bias, torch.Tensor):
        d["bias"] = attn_bias
        return d
    if t is _ab.LowerTriangularMaskWithTensorBias:
        d.update(mask_kind=MASK_CAUSAL_TOP_LEFT, bias=attn_bias._bias)
        return d
    if t is _ab.LowerTriangularMask:
        d.update(mask_kind=MASK_CAUSAL_TOP_LEFT)
        return d
    if t is _ab.LowerTriangularFromBottomRightMask:
        d.update(mask_kind=MASK_CAUSAL_BOTTOM_RIGHT)
        return d
    if t is _ab.LowerTriangularFromBottomRightLocalAttentionMask:
        d.update(mask_kind=MASK_CAUSAL_BOTTOM_RIGHT, window_left=attn_bias._window_size - 1)
        return d
    if t is _ab.LocalAttentionFromBottomRightMask:
        d.update(mask_kind=MASK_LOCAL_BOTTOM_RIGHT, window_left=attn_bias.window_left,
                 window_right=attn_bias.window_right)
        return d
    if t in _b.PAGED_MASKS:
        # Paged lanes: seqstart_k holds each lane's start relative to its own pages (0 for padded
        # lanes), and block_tables maps lane pages onto the physical K/V rows.
        kw = attn_bias._block_kwargs()
        d["mask_kind"] = _kind(bool(kw.get("causal", False)), bool(kw.get("bottom_right", False)))
        if kw.get("window", 0):
            d["window_left"] = int(kw["window"]) - 1
        qi, ki = attn_bias.q_seqinfo, attn_bias.k_seqinfo
        dev = device if device is not None else qi.seqstart.device
        d["seqstart_q"] = qi.seqstart.to(dev)
        # Built on the device from the seqinfo's tensors (no host copy, so a decode step can be
        # captured in a CUDA graph): gappy lanes start at their seqstart, padded lanes at 0.
        if isinstance(ki, _ab._GappySeqInfo):
            ss = ki.seqstart.to(device=dev, dtype=torch.int32)
            d["seqstart_k"] = torch.cat([ss[:-1], ss.new_zeros(1)])
        else:
            d["seqstart_k"] = torch.zeros(len(ki.seqlen_py) + 1, dtype=torch.int32, device=dev)
        d["seqlen_k"] = ki.seqlen.to(dev)
        d["max_seqlen_q"] = int(qi.max_seqlen)
        d["block_tables"] = attn_bias.block_tables.to(device=dev, dtype=torch.int32)
        d["page_size"] = int(attn_bias.page_size)
        return d
    if t in _VARLEN_MASKS:
        kw = attn_bias._block_kwargs()
        causal, br = bool(kw.get("causal", False)), bool(kw.get("bottom_right", False))
        d["mask_kind"] = _kind(causal, br)
        if kw.get("window", 0):
            d["window_left"] = int(kw["window"]) - 1
        if kw.get("window_left") is not None:
            d["window_left"] = int(kw["window_left"])
        if kw.get("window_right") is not None:
            d["window_right"] = int(kw["window_right"])
        qi, ki = attn_bias.q_seqinfo, attn_bias.k_seqinfo
        if device is not None:
            qi, ki = qi.to(device), ki.to(device)
        d["seqstart_q"] = qi.seqstart
        d["seqstart_k"] = ki.seqstart
        if isinstance(ki, (_ab._PaddedSeqLenInfo, _ab._GappySeqInfo)):
            d["seqlen_k"] = ki.seqlen
        d["max_seqlen_q"] = int(qi.max_seqlen)
        return d
    raise NotImplementedError(f"cutlass.FwOp: no kernel descriptor for attn_bias of type {t.__name__}")


def _packed_to_padded_lse(lse: torch.Tensor, seqstart_py, max_len: int) -> torch.Tensor:
    """[1, H, total] -> [num_seqs, H, max_len], +inf past each sequence's length."""
    starts = torch.tensor(seqstart_py[:-1], device=lse.device, dtype=torch.long)
    lens = torch.tensor([b - a for a, b in zip(seqstart_py, seqstart_py[1:])], device=lse.device, dtype=torch.long)
    ar = torch.arange(max_len, device=lse.device)
    idx = starts[:, None] + ar[None, :]  # [S, max_len]
    valid = ar[None, :] < lens[:, None]
    idx = torch.where(valid, idx, torch.zeros_like(idx)).clamp_(max=max(lse.shape[-1] - 1, 0))
    if lse.shape[-1] == 0:
        return lse.new_full((len(seqstart_py) - 1, lse.shape[1], max_len), math.inf)
    got = lse[0][:, idx].permute(1, 0, 2)  # [S, H, max_len]
    return torch.where(valid[:, None, :], got, torch.full_like(got, math.inf))


class FwOp(AttentionFwOpBase):
    """mslk's attention forward (torch.ops.mslk.fmha_fused_fwd): for fp16/bf16 with K, Kv <= 256 the
    fused kernels (in-kernel masks, dropout): the Hopper kernel on sm_90 where it applies, the
    FlashAttention-2 style kernel elsewhere. float32 and head dims up to 65536 run an exact path on
    the GPU (ATen matmuls over chunks of heads and query rows, float32 accumulation; the CPU
    backend's results and dropout masks), as cutlass.BwOp's backward does for them."""

    OPERATOR = None  # resolved lazily: torch.ops.mslk.fmha_fused_fwd
    NAME = "cutlassF-pt"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (8, 0)
    SUPPORTED_DTYPES = set(_b.FP)
    SUPPORTED_MAX_K = 65536
    SUPPORTED_MIN_K = 1
    SUPPORTED_ATTN_BIAS_TYPES = (*_DENSE_MASKS, *_VARLEN_MASKS, *_b.PAGED_MASKS)
    SUPPORTS_DROPOUT = True
    SUPPORTS_CUSTOM_SCALE = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
    SUPPORTS_OUTPUT_DTYPE = False
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = False
    IS_DETERMINISTIC = True
    VARLEN_LSE_PACKED = False
    UNAVAILABLE_REASON = "needs a CUDA build of mslk (torch.ops.mslk.fmha_fused_fwd has no CUDA kernel here)"

    @classmethod
    def is_available(cls) -> bool:
        return hasattr(torch.ops.mslk, "fmha_fused_fwd") and _kernel_registered(_OP_NAME, "CUDA")

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        reasons = super().not_supported_reasons(d)
        if isinstance(d.attn_bias, torch.Tensor) and d.attn_bias.dtype not in (torch.float32, d.query.dtype):
            reasons.append(f"attn_bias dtype {d.attn_bias.dtype} (supported: float32 or the query dtype)")
        if d.p != 0.0 and isinstance(d.attn_bias, _ab._PagedBase):
            reasons.append("dropout with paged K/V")
        return reasons

    @classmethod
    def apply(cls, inp: Inputs, needs_gradient: bool) -> Tuple[torch.Tensor, Optional[Context]]:
        q, k, v = inp.query, inp.key, inp.value
        if q.ndim == 3:
            q, k, v = q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)
        bias = inp.attn_bias
        grouped = q.ndim == 5
        if grouped:
            B, Mq, G, H, K = q.shape
            q = q.reshape(B, Mq, G * H, K)
            k = k.reshape(B, k.shape[1], G * H, k.shape[-1])
            v = v.reshape(B, v.shape[1], G * H, v.shape[-1])
        desc = mask_descriptor(bias, q.device)
        tb = desc.pop("bias")
        if tb is not None:
            if inp.query.ndim == 3 and tb.ndim == 3:
                tb = tb.unsqueeze(1)
            if grouped and tb.ndim >= 3:
                # [.., G, H, Mq, Mkv] broadcast -> [B, G*H, Mq, Mkv]
                tb = tb.expand(B, G, H, q.shape[1], k.shape[1]).reshape(B, G * H, q.shape[1], k.shape[1])
        rng = draw_rng_state() if inp.p > 0.0 else None
        if rng is not None:
            desc.update(dropout_p=float(inp.p), rng_state=rng)
        out, lse = torch.ops.mslk.fmha_fused_fwd(q, k, v, tb, scale=inp.scale_float, **desc)
        if isinstance(bias, _ab.VARLEN_BIASES) and not cls.VARLEN_LSE_PACKED:
            lse = _packed_to_padded_lse(lse, bias.q_seqinfo.seqstart_py, bias.q_seqinfo.max_seqlen)
        if grouped:
            out = out.reshape(B, Mq, G, H, out.shape[-1])
            lse = lse.reshape(lse.shape[0], G, H, lse.shape[-1])
        if inp.query.ndim == 3:
            out = out[:, :, 0]
        return out, Context(lse=lse, out=out, rng_state=rng)


class BwOp(FusedBw, AttentionBwOpBase):
    """Attention backward on torch.ops.mslk.fmha_fused_bwd (fp16/bf16/fp32, dropout, bias gradient)."""

    NAME = "cutlassB-pt"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (8, 0)
    SUPPORTED_DTYPES = set(_b.FP)
    SUPPORTED_MAX_K = 65536
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS, *_b.TENSOR_BIASES,
                                 *_b.PADDED_MASKS[:2])
    SUPPORTS_DROPOUT = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
    SUPPORTS_BMGHK = True
    SUPPORTS_ATTN_BIAS_GRAD = True
    VARLEN_LSE_PACKED = False

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        reasons = super().not_supported_reasons(d)
        if isinstance(d.attn_bias, torch.Tensor) and d.attn_bias.dtype not in (torch.float32, d.query.dtype):
            reasons.append(f"attn_bias dtype {d.attn_bias.dtype} (supported: float32 or the query dtype)")
        return reasons
