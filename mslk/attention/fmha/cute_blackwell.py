"""CuTe DSL Blackwell attention (sm100): not part of this build."""

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(AttentionFwOpBase):
    NAME = "cute_blackwellF"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 128
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS)
    UNAVAILABLE_REASON = _b.NO_BLACKWELL
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (10, 0)


class FwOpDecode(FwOp):
    NAME = "cute_blackwellF_decode"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 128
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS)
    UNAVAILABLE_REASON = _b.NO_BLACKWELL

    @classmethod
    def shape_not_supported_reasons(cls, Mq, Mkv, K, Kv):
        return super().shape_not_supported_reasons(Mq, Mkv, K, Kv) + _b.head_dim_in({64, 128}, K, Kv)


class BwOp(AttentionBwOpBase):
    NAME = "cute_blackwellB"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 128
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS)
    UNAVAILABLE_REASON = _b.NO_BLACKWELL
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (10, 0)

    @classmethod
    def shape_not_supported_reasons(cls, Mq, Mkv, K, Kv):
        return super().shape_not_supported_reasons(Mq, Mkv, K, Kv) + _b.head_dim_in({64, 96, 128}, K, Kv)
