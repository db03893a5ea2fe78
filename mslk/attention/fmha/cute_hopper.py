"""CuTe DSL Hopper attention classes. `BwOp` runs `torch.ops.mslk.fmha_fused_bwd` (see
_backward.py) within the CuTe Hopper backward's contract (sm_90, fp16/bf16, head dims 64/96/128,
dense / local / block-diagonal masks), available where that op has a CUDA kernel and a compute
capability 9.0 GPU is present. `FwOp` has no kernel in this build."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import flash3 as _flash3
from mslk.attention.fmha._backward import FusedBw, bwd_registered
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class _Sm90(_b.HeadDims):
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (9, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 128
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS)
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET


class FwOp(_Sm90, AttentionFwOpBase):
    NAME = "cute_hopperF"
    HEAD_DIMS = {64, 128}


class BwOp(_Sm90, FusedBw, AttentionBwOpBase):
    """Attention backward on torch.ops.mslk.fmha_fused_bwd (sm_90, fp16/bf16, K in {64, 96, 128})."""

    NAME = "cute_hopperB"
    HEAD_DIMS = {64, 96, 128}
    UNAVAILABLE_REASON = _flash3.BwOp.UNAVAILABLE_REASON

    @classmethod
    def is_available(cls) -> bool:
        return bwd_registered("CUDA") and _flash3._has_sm90_device()

    @classmethod
    def not_supported_reasons(cls, d):
        return super().not_supported_reasons(d) + _flash3._newer_than_sm90(d)
