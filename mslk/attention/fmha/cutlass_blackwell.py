"""CUTLASS Blackwell attention (sm100): not part of this build; FwOpDecode runs on mslk's split-K decode
kernel (_decode_classes.py)."""

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import _decode_classes
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(_b.Blackwell, AttentionFwOpBase):
    NAME = "cutlass_blackwellF"
    HEAD_DIMS = {64, 128}


FwOpDecode = _decode_classes.decode_class("cutlass_blackwellF_decode", __name__, _decode_classes.CUTLASS, False)


class BwOp(_b.Blackwell, AttentionBwOpBase):
    NAME = "cutlass_blackwellB"
    HEAD_DIMS = {64, 128}
