"""CuTe DSL Hopper attention. No kernel in this build yet."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(AttentionFwOpBase):
    NAME = "cute_hopperF"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (9, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 128
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS)
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET

    @classmethod
    def shape_not_supported_reasons(cls, Mq, Mkv, K, Kv):
        return super().shape_not_supported_reasons(Mq, Mkv, K, Kv) + _b.head_dim_in({64, 128}, K, Kv)


class BwOp(AttentionBwOpBase):
    NAME = "cute_hopperB"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (9, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 128
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS)
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET

    @classmethod
    def shape_not_supported_reasons(cls, Mq, Mkv, K, Kv):
        return super().shape_not_supported_reasons(Mq, Mkv, K, Kv) + _b.head_dim_in({64, 96, 128}, K, Kv)
