"""Shared helpers of the backend operator classes that have no kernel in this build yet.

Every backend class of the spec exists with its support metadata so that `not_supported_reasons`
explains a rejection; `is_available()` is False until its kernel lands, so dispatch never picks it.
"""

from __future__ import annotations

from typing import List, Optional, Set

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.utils import unavailable

FP = {torch.float32, torch.float16, torch.bfloat16}
HALF = {torch.float16, torch.bfloat16}

BASIC_MASKS = (type(None), _ab.LowerTriangularMask, _ab.LowerTriangularFromBottomRightMask)
LOCAL_MASKS = (_ab.LowerTriangularFromBottomRightLocalAttentionMask, _ab.LocalAttentionFromBottomRightMask)
VARLEN_MASKS = (
    _ab.BlockDiagonalMask, _ab.BlockDiagonalCausalMask, _ab.BlockDiagonalCausalFromBottomRightMask,
    _ab.BlockDiagonalCausalLocalAttentionMask, _ab.BlockDiagonalCausalLocalAttentionFromBottomRightMask,
)
PADDED_MASKS = (
    _ab.BlockDiagonalPaddedKeysMask, _ab.BlockDiagonalCausalWithOffsetPaddedKeysMask,
    _ab.BlockDiagonalLocalAttentionPaddedKeysMask, _ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask,
)
GAPPY_MASKS = (
    _ab.BlockDiagonalGappyKeysMask, _ab.BlockDiagonalCausalWithOffsetGappyKeysMask,
    _ab.BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask,
)
PAGED_MASKS = (
    _ab.PagedBlockDiagonalPaddedKeysMask, _ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask,
    _ab.PagedBlockDiagonalCausalLocalPaddedKeysMask, _ab.PagedBlockDiagonalGappyKeysMask,
    _ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask,
)
TENSOR_BIASES = (torch.Tensor, _ab.LowerTriangularMaskWithTensorBias)
# What most backends take: dense causal, local windows, packed varlen and padded-key masks.
STANDARD_MASKS = (*BASIC_MASKS, *LOCAL_MASKS, *VARLEN_MASKS, *PADDED_MASKS)


# The platform reasons are mslk.utils.unavailable's, so a backend and a raising stub say the same.
NO_ROCM = unavailable.ROCM
NO_MTIA = unavailable.MTIA
NO_BLACKWELL = unavailable.SM100
NO_KERNEL_YET = "the kernel has not landed in this build yet"


def head_dim_in(allowed, K: int, Kv: int) -> List[str]:
    bad = sorted({x for x in (K, Kv) if x not in allowed})
    return [f"embed_dim {bad} not in {sorted(allowed)}"] if bad else []


class HeadDims:
    """Mixin, listed before the operator base class: rejects head dims outside HEAD_DIMS
    (None: only the base class's SUPPORTED_MIN_K/SUPPORTED_MAX_K bounds apply)."""

    HEAD_DIMS: Optional[Set[int]] = None

    @classmethod
    def shape_not_supported_reasons(cls, Mq, Mkv, K, Kv):
        reasons = super().shape_not_supported_reasons(Mq, Mkv, K, Kv)
        return reasons + head_dim_in(cls.HEAD_DIMS, K, Kv) if cls.HEAD_DIMS is not None else reasons


class Blackwell(HeadDims):
    """Support metadata shared by the sm100 backends (cute_blackwell, cutlass_blackwell)."""

    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (10, 0)
    SUPPORTED_DTYPES = set(HALF)
    SUPPORTED_MAX_K = 128
    SUPPORTED_ATTN_BIAS_TYPES = STANDARD_MASKS
    UNAVAILABLE_REASON = NO_BLACKWELL


def with_num_splits(base: type, n: int) -> type:
    """`base` fixed to n splits, named `{base.NAME}_S{n}`, as a class `FwOp_S{n}` of base's module."""
    return type(f"FwOp_S{n}", (base,), {"NUM_SPLITS": n, "NAME": f"{base.NAME}_S{n}", "__module__": base.__module__})
