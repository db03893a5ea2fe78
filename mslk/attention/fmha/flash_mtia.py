"""MTIA flash attention: not part of this build."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class _Mtia:
    SUPPORTED_DEVICES = {"mtia"}
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = _b.STANDARD_MASKS
    UNAVAILABLE_REASON = _b.NO_MTIA


class FwOp(_Mtia, AttentionFwOpBase):
    NAME = "flash_mtiaF"


class BwOp(_Mtia, AttentionBwOpBase):
    NAME = "flash_mtiaB"
