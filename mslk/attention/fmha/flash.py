"""FlashAttention 2. No kernel in this build yet."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import _raw_ops  # noqa: F401  (registers the raw backend ops, spec "Raw backend ops")
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(AttentionFwOpBase):
    NAME = "fa2F"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (8, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.STANDARD_MASKS, *_b.PAGED_MASKS[:3])
    SUPPORTS_DROPOUT = True
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = True
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET


class BwOp(AttentionBwOpBase):
    NAME = "fa2B"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (8, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS)
    SUPPORTS_DROPOUT = True
    SUPPORTS_BMGHK = False  # grouped-head BMGHK is forward-only
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET
