"""Shared helpers of the backend operator classes that have no kernel in this build yet.

Every backend class of the spec exists with its support metadata so that `not_supported_reasons`
explains a rejection; `is_available()` is False until its kernel lands, so dispatch never picks it.
"""

from __future__ import annotations

from typing import List

import torch

from mslk.attention.fmha import attn_bias as _ab

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


def head_dim_in(allowed, K: int, Kv: int) -> List[str]:
    bad = sorted({x for x in (K, Kv) if x not in allowed})
    return [f"embed_dim {bad} not in {sorted(allowed)}"] if bad else []


NO_ROCM = "ROCm/CK kernels are not part of this build (NVIDIA only)"
NO_MTIA = "MTIA kernels are not part of this build"
NO_BLACKWELL = "Blackwell (sm100) kernels are not part of this build"
NO_KERNEL_YET = "the kernel has not landed in this build yet"
