"""ROCm CK decoder attention (inference only): not part of this build."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionFwOpBase


class FwOp(AttentionFwOpBase):
    NAME = "ck_decoderF"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.FP)
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = _b.STANDARD_MASKS
    UNAVAILABLE_REASON = _b.NO_ROCM
    SUPPORTS_BMGHK = True
