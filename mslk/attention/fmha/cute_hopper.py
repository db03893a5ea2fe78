"""CuTe DSL Hopper attention. No kernel in this build yet."""

from mslk.attention.fmha import _backends as _b
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


class BwOp(_Sm90, AttentionBwOpBase):
    NAME = "cute_hopperB"
    HEAD_DIMS = {64, 96, 128}
