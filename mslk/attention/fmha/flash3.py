"""FlashAttention 3 (Hopper). No kernel in this build yet: the Hopper forward lands next."""

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase

_K = {64, 128, 192, 256}


class FwOp(_b.HeadDims, AttentionFwOpBase):
    NAME = "fa3F"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (9, 0)
    SUPPORTED_DTYPES = {*_b.HALF, torch.float8_e4m3fn}
    SUPPORTED_MAX_K = 256
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.STANDARD_MASKS, *_b.GAPPY_MASKS, *_b.PAGED_MASKS)
    SUPPORTS_DROPOUT = False
    SUPPORTS_DIFFERENT_VALUE_EMBED = True
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = True
    SUPPORTS_OUTPUT_DTYPE = True
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET
    HEAD_DIMS = _K


class FwOp_KVSplit(FwOp):
    NAME = "fa3F_kvsplit"


class BwOp(_b.HeadDims, AttentionBwOpBase):
    NAME = "fa3B"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (9, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 256
    # padded, gappy, paged and BMGHK are forward-only
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.LOCAL_MASKS, *_b.VARLEN_MASKS)
    SUPPORTS_BMGHK = False
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET
    HEAD_DIMS = _K
