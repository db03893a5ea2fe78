"""FlashAttention 3 (Hopper; the spec's `flash3` classes), backed by mslk's fused attention forward.

`FwOp` runs `torch.ops.mslk.fmha_fused_fwd` (flash.fused_apply): on sm_90 that is mslk's
FlashAttention-3-style Hopper kernel (TMA + wgmma) for every problem it takes, paged K/V included. Available where
the fused op has a CUDA kernel and a compute capability 9.0 GPU is present; inputs on other devices
are rejected. What our kernel honours, within FlashAttention 3's contract: fp16/bf16, and FP8 E4M3
q / k / v given as ScaledTensors (common.pack_fp8_tensorwise_per_head: per-head descales; the output
in their original_dtype), computed as attention on the operands dequantized to that dtype
(_fp8.py; no FP8 tensor-core kernel yet), head dims 64/128/192/256 with K != Kv allowed, no dropout, dense /
varlen / padded / gappy / paged masks, BMGHK (K/V expanded along H are read in place), packed
variable-length LSE. No partial attention or custom output dtype (the kernel writes the query
dtype). FwOp_KVSplit runs the same kernel (no split-KV scheduling: same results). BwOp runs
`torch.ops.mslk.fmha_fused_bwd` (see _backward.py) within FlashAttention 3's backward contract
(fp16/bf16, head dims 64/128/192/256, no dropout; dense / local / block-diagonal masks; padded,
gappy, paged and BMGHK are forward-only), available where that op has a CUDA kernel and a
compute capability 9.0 GPU is present.
"""

from typing import List

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import _fp8
from mslk.attention.fmha import _raw_ops
from mslk.attention.fmha._backward import FusedBw, bwd_registered
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Inputs, capability_mismatch, cuda_available
from mslk.attention.fmha.flash import fused_apply

_K = {64, 128, 192, 256}
_CAPABILITY = (9, 0)


_SM90_PRESENT: List[bool] = []  # computed once


@torch.compiler.assume_constant_result  # (torch.compile folds it)
def _has_sm90_device() -> bool:
    if not _SM90_PRESENT:
        _SM90_PRESENT.append(torch.cuda.is_available() and any(
            torch.cuda.get_device_capability(i) == _CAPABILITY for i in range(torch.cuda.device_count())))
    return _SM90_PRESENT[0]


def _newer_than_sm90(d: Inputs):
    """(A lower capability is reported by the base class.)"""
    dev = d.query.device
    if dev.type == "cuda" and cuda_available():
        why = capability_mismatch(dev.index, (0, 0), _CAPABILITY)
        if why:
            return [why]
    return []


class FwOp(_b.HeadDims, AttentionFwOpBase):
    """FlashAttention 3 forward on mslk's fused kernel (sm_90, fp16/bf16, K, Kv in {64, 128, 192, 256})."""

    OPERATOR = None  # resolved lazily: torch.ops.mslk.fmha_fused_fwd
    NAME = "fa3F"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = _CAPABILITY
    SUPPORTED_DTYPES = {*_b.HALF, _fp8.E4M3}  # FP8: ScaledTensor operands (_fp8.py)
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.STANDARD_MASKS, *_b.GAPPY_MASKS, *_b.PAGED_MASKS)
    SUPPORTS_DROPOUT = False
    SUPPORTS_CUSTOM_SCALE = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = False  # the kernel writes the query dtype, not the float32 a partial needs
    SUPPORTS_OUTPUT_DTYPE = False
    IS_DETERMINISTIC = True
    VARLEN_LSE_PACKED = True
    UNAVAILABLE_REASON = ("needs a CUDA build of mslk (torch.ops.mslk.fmha_fused_fwd with a CUDA kernel) and a "
                          "compute capability 9.0 (Hopper) GPU")
    HEAD_DIMS = _K

    @classmethod
    def is_available(cls) -> bool:
        return _raw_ops.fused_cuda_registered() and _has_sm90_device()

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        return super().not_supported_reasons(d) + _newer_than_sm90(d) + _fp8.reasons(d)

    @classmethod
    def apply(cls, inp, needs_gradient):
        return fused_apply(cls, _fp8.dequantized(inp) if _fp8.is_fp8(inp.query) else inp)


class FwOp_KVSplit(FwOp):
    """Same kernel as FwOp (no split-KV scheduling in this build; identical results)."""

    NAME = "fa3F_kvsplit"


class BwOp(_b.HeadDims, FusedBw, AttentionBwOpBase):
    """FlashAttention 3 backward on torch.ops.mslk.fmha_fused_bwd (sm_90, fp16/bf16, K, Kv in {64, 128, 192, 256})."""

    NAME = "fa3B"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (9, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    # padded, gappy, paged and BMGHK are forward-only
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS)
    SUPPORTS_BMGHK = False
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
    VARLEN_LSE_PACKED = True
    UNAVAILABLE_REASON = ("needs a CUDA build of mslk (torch.ops.mslk.fmha_fused_bwd with a CUDA kernel) and a "
                          "compute capability 9.0 (Hopper) GPU")
    HEAD_DIMS = _K

    @classmethod
    def is_available(cls) -> bool:
        return bwd_registered("CUDA") and _has_sm90_device()

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        return super().not_supported_reasons(d) + _newer_than_sm90(d)
