"""Triton split-K decode attention (INT4/FP8 KV caches). No kernel in this build yet."""

from typing import Dict

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionFwOpBase, InputsFp8  # noqa: F401  (the spec's import path of InputsFp8)


class FwOp(_b.HeadDims, AttentionFwOpBase):
    NAME = "triton_splitKF"
    SUPPORTED_DEVICES = {"cuda"}
    SUPPORTED_DTYPES = set(_b.FP)
    SUPPORTED_MAX_K = 512
    SUPPORTED_MIN_K = 16
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS, *_b.GAPPY_MASKS,
                                 *_b.PAGED_MASKS)
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = True
    SUPPORTS_OUTPUT_DTYPE = True
    UNAVAILABLE_REASON = _b.NO_KERNEL_YET
    HEAD_DIMS = {16, 32, 64, 128, 256, 512}
    NUM_SPLITS: int = 0  # 0: chosen by a heuristic


# Named power-of-two split counts 1..128, plus 48, 72, 80, 96 and 112.
FwOp_Map: Dict[int, type] = {n: _b.with_num_splits(FwOp, n) for n in sorted([1, 2, 4, 8, 16, 32, 64, 128, 48, 72, 80, 96, 112])}
FwOp_S1 = FwOp_Map[1]
FwOp_S2 = FwOp_Map[2]
FwOp_S4 = FwOp_Map[4]
FwOp_S8 = FwOp_Map[8]
FwOp_S16 = FwOp_Map[16]
FwOp_S32 = FwOp_Map[32]
FwOp_S64 = FwOp_Map[64]
FwOp_S128 = FwOp_Map[128]


def merge_attentions(attn_out, lse_out, attn_split, lse_split) -> None:
    """In place, allocation-free merge of split attention: attn_split [S, B, M, (G,) H, K] and
    lse_split [S, B, (G,) H, M] (float32) into attn_out [B, M, (G,) H, K] and lse_out [B, (G,) H, M]
    (or None). Runs mslk's merge kernel (torch.ops.mslk._fmha_merge_attentions_into)."""
    from mslk.attention.fmha import _merge_ops

    _merge_ops.merge_into(attn_out, lse_out, attn_split, lse_split)
