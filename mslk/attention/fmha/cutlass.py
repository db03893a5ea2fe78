"""Classic CUTLASS attention (NVIDIA SM60-SM90). No kernel in this build yet."""

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(AttentionFwOpBase):
    NAME = "cutlassF-pt"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (5, 0)
    SUPPORTED_DTYPES = set(_b.FP)
    SUPPORTED_MAX_K = 65536
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS, *_b.TENSOR_BIASES,
                                 *_b.PADDED_MASKS[:2])
    SUPPORTS_DROPOUT = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = False
    VARLEN_LSE_PACKED = False
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET


class BwOp(AttentionBwOpBase):
    NAME = "cutlassB-pt"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.FP)
    SUPPORTED_MAX_K = 65536
    SUPPORTED_ATTN_BIAS_TYPES = FwOp.SUPPORTED_ATTN_BIAS_TYPES
    SUPPORTS_DROPOUT = True
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
    SUPPORTS_ATTN_BIAS_GRAD = True
    VARLEN_LSE_PACKED = False
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET
