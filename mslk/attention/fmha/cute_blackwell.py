"""CuTe DSL Blackwell attention (sm100): not part of this build."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(_b.Blackwell, AttentionFwOpBase):
    NAME = "cute_blackwellF"


class FwOpDecode(FwOp):
    NAME = "cute_blackwellF_decode"
    HEAD_DIMS = {64, 128}


class BwOp(_b.Blackwell, AttentionBwOpBase):
    NAME = "cute_blackwellB"
    HEAD_DIMS = {64, 96, 128}
