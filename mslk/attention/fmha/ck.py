"""ROCm Composable Kernel attention: not part of this build."""

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(AttentionFwOpBase):
    NAME = "ckF"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 512
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS)
    UNAVAILABLE_REASON = _b.NO_ROCM
    SUPPORTS_DROPOUT = True
    SUPPORTS_BMGHK = True


class BwOp(AttentionBwOpBase):
    NAME = "ckB"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS)
    UNAVAILABLE_REASON = _b.NO_ROCM
    SUPPORTS_DROPOUT = True
