"""CuTe DSL Blackwell attention (sm100): not part of this build; FwOpDecode runs on mslk's split-K decode
kernel (_decode_classes.py)."""

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import _decode_classes
from mslk.attention.fmha.common import AttentionBwOpBase, AttentionFwOpBase


class FwOp(_b.Blackwell, AttentionFwOpBase):
    NAME = "cute_blackwellF"
    SUPPORTED_DTYPES = {*_b.HALF, torch.float8_e4m3fn}
    HEAD_DIMS = {64, 96, 128}


FwOpDecode = _decode_classes.decode_class("cute_blackwellF_decode", __name__, _decode_classes.CUTE, True)


class BwOp(_b.Blackwell, AttentionBwOpBase):
    NAME = "cute_blackwellB"
    HEAD_DIMS = {64, 96, 128}
