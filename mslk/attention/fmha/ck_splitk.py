"""ROCm CK split-K decode attention: not part of this build."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionFwOpBase


class FwOp(AttentionFwOpBase):
    NAME = "ck_splitKF"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.FP)
    SUPPORTED_MAX_K = 256
    SUPPORTED_MIN_K = 0
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS, *_b.GAPPY_MASKS,
                                 *_b.PAGED_MASKS)
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = True
    SUPPORTS_OUTPUT_DTYPE = True
    UNAVAILABLE_REASON = _b.NO_ROCM
    NUM_SPLITS: int = 0  # 0: chosen by a heuristic


FwOp_S1 = _b.with_num_splits(FwOp, 1)
FwOp_S2 = _b.with_num_splits(FwOp, 2)
FwOp_S4 = _b.with_num_splits(FwOp, 4)
FwOp_S8 = _b.with_num_splits(FwOp, 8)
FwOp_S16 = _b.with_num_splits(FwOp, 16)
FwOp_S32 = _b.with_num_splits(FwOp, 32)
FwOp_S64 = _b.with_num_splits(FwOp, 64)
FwOp_S128 = _b.with_num_splits(FwOp, 128)

