"""ROCm Composable Kernel attention: not part of this build."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class _Ck:
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_ATTN_BIAS_TYPES = _b.STANDARD_MASKS
    UNAVAILABLE_REASON = _b.NO_ROCM
    SUPPORTS_DROPOUT = True


class FwOp(_Ck, AttentionFwOpBase):
    NAME = "ckF"
    SUPPORTED_MAX_K = 256
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True


class BwOp(_Ck, AttentionBwOpBase):
    NAME = "ckB"
    SUPPORTED_MAX_K = 256
