"""CUTLASS Blackwell attention (sm100): not part of this build."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(_b.Blackwell, AttentionFwOpBase):
    NAME = "cutlass_blackwellF"
    HEAD_DIMS = {64, 128}


class FwOpDecode(FwOp):
    NAME = "cutlass_blackwellF_decode"


class BwOp(_b.Blackwell, AttentionBwOpBase):
    NAME = "cutlass_blackwellB"
    HEAD_DIMS = {64, 128}
